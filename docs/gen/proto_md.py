"""The gRPC API reference, generated from proto/engram/v1/*.proto at docs build time.

protoc (grpc_tools) compiles the .proto files into a descriptor set with source info, so every service,
RPC, message, field, enum and value is read from the compiler's own view of the contract, with the comment
written beside it. The status codes each RPC answers come from ``RPC_CODES`` below; the build fails when an
RPC has no entry there, so a new RPC cannot reach the docs without its codes.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"

# Every call can answer these (the interceptors and the batchers, before any RPC-specific work).
COMMON_CODES = ("INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "DEADLINE_EXCEEDED",
                "UNAVAILABLE", "INTERNAL")
# What an RPC answers beyond COMMON_CODES, and when (server/errors.py maps each domain error to its code).
_TENANT = ("NOT_FOUND", "unknown tenant")
_WRITE_FULL = ("RESOURCE_EXHAUSTED", "write queue full, or storage full (nothing applied)")
_STORAGE_FULL = ("RESOURCE_EXHAUSTED", "storage full (nothing applied)")
RPC_CODES: dict[str, tuple[tuple[str, str], ...]] = {
    "Write": (_TENANT, _WRITE_FULL),
    "Search": (_TENANT, ("RESOURCE_EXHAUSTED", "search queue full: answered at once")),
    "Get": (_TENANT,),
    "Delete": (_TENANT, _STORAGE_FULL),
    "List": (_TENANT,),
    "Info": (),
    "History": (("NOT_FOUND", "unknown tenant or memory"),),
    "Confirm": (("NOT_FOUND", "unknown tenant or memory"),
                ("FAILED_PRECONDITION", "a memory that is neither PENDING nor ACTIVE"), _STORAGE_FULL),
    "LinkUpdate": (("NOT_FOUND", "unknown tenant or memory"),
                   ("FAILED_PRECONDITION", "unlinking a link that is not there, or the older memory is already "
                    "updated by another"), _STORAGE_FULL),
    "Forget": (_TENANT, _STORAGE_FULL),
    "Audit": (_TENANT,),
    "Touch": (_TENANT, _STORAGE_FULL),
    "Consolidate": (_TENANT, _STORAGE_FULL),
    "Extract": (_TENANT, ("FAILED_PRECONDITION", "no extractor configured (memory.extractor_url)"),
                _STORAGE_FULL),
    "GetSettings": (_TENANT,),
    "UpdateSettings": (_TENANT, _STORAGE_FULL),
    "CreateTenant": (("ALREADY_EXISTS", "the tenant exists"),
                     ("NOT_FOUND", "unknown template tenant"),
                     ("FAILED_PRECONDITION", "a template tenant on a Ray cluster"), _STORAGE_FULL),
    "ListTenants": (),
    "CreateKey": (_STORAGE_FULL,),
    "RevokeKey": (("NOT_FOUND", "unknown key"), _STORAGE_FULL),
    "RotateKey": (("NOT_FOUND", "unknown key"), _STORAGE_FULL),
    "Stats": (),
    "DeleteTenant": (_TENANT,),
}

# What an RPC does, for the RPCs whose line in service.proto carries no comment (a comment there wins).
RPC_SUMMARY = {
    "Write": "store memories (one request is one durable log group)",
    "Search": "ranked hits with their score breakdown, for one or more queries",
    "Get": "memories by id (ids not found are listed as missing)",
    "Delete": "purge memories by id",
    "List": "a page of memories by filter",
    "Info": "models, limits, batching and the rerank controller",
    "CreateTenant": "a new tenant, optionally copied from a template tenant",
    "ListTenants": "the tenants the key covers",
    "CreateKey": "a new key for tenant ids, prefixes or admin; the secret is shown once",
}

# "README "Section"" in proto comments points at the section's page here.
README_SECTIONS = {
    "Ranking": "../concepts/ranking.md",
    "Memory hygiene": "../concepts/hygiene.md",
    "Guarantees": "../concepts/guarantees.md",
    "Reranker": "../benchmarks/reranker.md",
    "Serving benchmark": "../benchmarks/serving.md",
    "Quality": "../benchmarks/quality.md",
    "Retrieval quality": "../benchmarks/quality.md",
    "Audit retention": "../operations/disk.md#audit-retention",
    "Choosing the thresholds": "../benchmarks/durability.md#choosing-the-thresholds",
    "Disk use": "../operations/disk.md",
    "Running on a cluster": "../operations/cluster.md",
}

# FieldDescriptorProto.Type → proto type name
_SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
            9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
_MESSAGE, _ENUM, _REPEATED = 11, 14, 3
# SourceCodeInfo paths: FileDescriptorProto / DescriptorProto field numbers
_MSG, _ENUM_T, _SERVICE, _FIELD, _NESTED, _VALUE, _METHOD = 4, 5, 6, 2, 3, 2, 2


def descriptor_set(proto_dir: Path = PROTO_DIR) -> descriptor_pb2.FileDescriptorSet:
    """The .proto files under proto_dir, compiled by protoc with their comments."""
    protos = sorted(str(p.relative_to(proto_dir)) for p in proto_dir.rglob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        args = ["protoc", f"-I{proto_dir}", "--include_source_info", f"--descriptor_set_out={out}", *protos]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {protos}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def link_readme_sections(text: str) -> str:
    """``README "Ranking"`` (how code comments point at a section) as a link to that section's page."""
    for name, page in README_SECTIONS.items():
        text = text.replace(f'README "{name}"', f"[{name}]({page})")
    return text


def _clean(comment: str) -> str:
    text = " ".join(line.strip() for line in comment.strip().splitlines())
    return link_readme_sections(text.replace("|", "\\|"))


@dataclass(frozen=True)
class _Comments:
    by_path: dict[tuple[int, ...], str]

    @classmethod
    def of(cls, file: descriptor_pb2.FileDescriptorProto) -> _Comments:
        found = {}
        for loc in file.source_code_info.location:
            text = " ".join(c for c in (loc.leading_comments, loc.trailing_comments) if c.strip())
            if text.strip():
                found[tuple(loc.path)] = _clean(text)
        return cls(found)

    def get(self, *path: int) -> str:
        return self.by_path.get(tuple(path), "")


def _anchor(name: str) -> str:
    return name.lower()


def _type_link(field: descriptor_pb2.FieldDescriptorProto, maps: dict[str, descriptor_pb2.DescriptorProto]) -> str:
    if field.type in (_MESSAGE, _ENUM):
        name = field.type_name.lstrip(".")
        if name in maps:   # map<K, V>: protoc writes a nested *Entry message
            entry = maps[name]
            return f"map<{_type_link(entry.field[0], maps)}, {_type_link(entry.field[1], maps)}>"
        short = name.rsplit(".", 1)[-1]
        return f"[{short}](#{_anchor(short)})"
    return _SCALARS[field.type]


def _label(field: descriptor_pb2.FieldDescriptorProto, maps: dict[str, descriptor_pb2.DescriptorProto]) -> str:
    if field.label == _REPEATED and field.type_name.lstrip(".") not in maps:
        return "repeated "
    if field.proto3_optional:
        return "optional "
    return ""


def _codes(method: str) -> str:
    if method not in RPC_CODES:
        raise SystemExit(f"docs/gen/proto_md.py: RPC {method} has no entry in RPC_CODES (the status codes it answers)")
    extra = "; ".join(f"`{code}` ({when})" for code, when in RPC_CODES[method])
    return f"{extra}; and the common codes" if extra else "the common codes"


def render(fds: descriptor_pb2.FileDescriptorSet) -> str:
    """The whole reference page as markdown."""
    files = [f for f in fds.file if f.package.startswith("engram.")]
    maps = {}
    for f in files:
        for m in f.message_type:
            for n in m.nested_type:
                if n.options.map_entry:
                    maps[f"{f.package}.{m.name}.{n.name}"] = n
    out = ["# gRPC API", "",
           "Generated from `proto/engram/v1/*.proto` when the site is built (`docs/gen/proto_md.py`). Every call "
           "carries `authorization: Bearer <key>`; how the status codes are meant is in "
           "[Status codes](status-codes.md), and the Python SDK wraps every RPC "
           "([Python SDK](python-sdk.md)).", "",
           "Every RPC can answer the common codes: " + ", ".join(f"`{c}`" for c in COMMON_CODES)
           + " (a bad field or limit, no or a bad key, a tenant the key does not cover or an admin call without "
           "an admin key, the deadline passed, shutting down or not ready, a bug). The table of each service "
           "names the codes an RPC answers beyond those.", ""]
    for f in files:
        comments = _Comments.of(f)
        for si, service in enumerate(f.service):
            out += [f"## {service.name}", "", comments.get(_SERVICE, si), "",
                    "| RPC | request | response | what | status codes |", "|---|---|---|---|---|"]
            for mi, method in enumerate(service.method):
                req, resp = method.input_type.rsplit(".", 1)[-1], method.output_type.rsplit(".", 1)[-1]
                out.append(f"| `{method.name}` | [{req}](#{_anchor(req)}) | [{resp}](#{_anchor(resp)}) | "
                           f"{comments.get(_SERVICE, si, _METHOD, mi) or RPC_SUMMARY.get(method.name, '')} | "
                           f"{_codes(method.name)} |")
            out.append("")
    for f in files:
        comments = _Comments.of(f)
        out += [f"## Messages in `{f.name}`", ""]
        for mi, message in enumerate(f.message_type):
            out += [f"### {message.name}", ""]
            if doc := comments.get(_MSG, mi):
                out += [doc, ""]
            if not message.field:
                out += ["No fields.", ""]
                continue
            out += ["| field | number | type | meaning |", "|---|---:|---|---|"]
            for fi, field in enumerate(message.field):
                out.append(f"| `{field.name}` | {field.number} | {_label(field, maps)}{_type_link(field, maps)} | "
                           f"{comments.get(_MSG, mi, _FIELD, fi)} |")
            if message.reserved_range or message.reserved_name:
                numbers = ", ".join(str(r.start) if r.end - r.start == 1 else f"{r.start}-{r.end - 1}"
                                    for r in message.reserved_range)
                names = ", ".join(f"`{n}`" for n in message.reserved_name)
                out += ["", f"Reserved (removed): {', '.join(x for x in (numbers, names) if x)}."]
            out.append("")
        out += [f"## Enums in `{f.name}`", ""]
        for ei, enum in enumerate(f.enum_type):
            out += [f"### {enum.name}", ""]
            if doc := comments.get(_ENUM_T, ei):
                out += [doc, ""]
            out += ["| value | number | meaning |", "|---|---:|---|"]
            for vi, value in enumerate(enum.value):
                out.append(f"| `{value.name}` | {value.number} | {comments.get(_ENUM_T, ei, _VALUE, vi)} |")
            out.append("")
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main() -> None:
    print(render(descriptor_set()), end="")


if __name__ == "__main__":
    main()
