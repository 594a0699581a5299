"""kubesim: a Kubernetes-API-compatible server with a simulated GPU cluster (see README.md).

Entry points: ``kubesim.cluster.Cluster`` (embedding), ``python -m kubesim`` (a server),
``kubesim.testing`` (the pytest fixture), ``kubesim.store.Store`` (the simulation's API).
"""
