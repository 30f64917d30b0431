"""deploy/kuberay/engram.yaml (untested on a real Kubernetes cluster) is at least well-formed: every document
parses, the engram.toml it mounts is a valid engram config for a cluster edge that attaches to the
RayService's application, and the names it wires together agree."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from server.config import load_config

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kuberay" / "engram.yaml"


def _docs() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def test_the_kuberay_manifest_wires_a_valid_config_to_the_serve_application(tmp_path: Path) -> None:
    docs = _docs()
    assert {"ConfigMap", "Secret", "RayService", "Deployment", "Service", "PersistentVolumeClaim"} <= set(docs)
    toml = tmp_path / "engram.toml"
    toml.write_text(docs["ConfigMap"]["data"]["engram.toml"])
    config = load_config(env={}, toml_path=toml)
    assert config.object_store.bucket and config.cluster.deploy is False and config.cluster.address == "auto"

    serve = yaml.safe_load(docs["RayService"]["spec"]["serveConfigV2"])
    (app,) = serve["applications"]
    assert app["name"] == config.cluster.app_name
    module, func = app["import_path"].split(":")
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
    assert func in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    mount = docs["RayService"]["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert any(Path(app["args"]["config"]).parent == Path(v["mountPath"]) for v in mount["volumeMounts"])

    edge = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    port = int(config.listen.rsplit(":", 1)[1])
    assert edge["readinessProbe"]["grpc"]["port"] == port == docs["Service"]["spec"]["ports"][0]["targetPort"]
    assert f"{docs['RayService']['metadata']['name']}-head-svc" in edge["args"][0]
    assert "engram serve --ray" in edge["args"][0]
