"""engram on Ray Serve (``engram serve --ray``; README "Running on a cluster").

Three deployments in one Serve application, and engram's own ``grpc.aio`` edge as the ingress:

- ``Encoder`` and ``Reranker`` (:mod:`server.cluster.deployments`): stateless, each holds one model and
  batches the texts / pairs of every tenant's requests into one forward pass (:mod:`server.cluster.passes`). They
  are called without a multiplexed model id (Serve splits batches by model id).
- ``TenantShard``: a whole engine (:class:`server.engine.engine.Engine`) for the tenants the
  consistent-hash ring (``ConsistentHashRouter``, keyed by ``session_id=tenant``) routes to it, its models
  being the two deployments above (:mod:`server.cluster.remote_models`). Every tenant's log is in object
  storage (``ObjectLogBackend``): loading a tenant takes it over and fences the log, so a replica that lost
  a tenant (the ring moved, it was partitioned) can never append to it again. Correctness comes from that
  fence, not from the router; its local files are caches.
- The edge (:mod:`server.cluster.ingress`): the same gRPC servicers, interceptors (auth, request ids,
  deadlines), health and reflection as a single node, on an engine stand-in that authorizes and forwards
  each tenant's call to its shard replica. A replica that died under a call answers UNAVAILABLE.

Importing this package does not import ray; :mod:`server.cluster.deployments` and
:mod:`server.cluster.ingress` do (``pip install -r requirements-cluster.txt`` or the ``cluster`` extra).
"""
