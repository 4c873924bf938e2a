"""Remote execution hosts (docs/contract.md §6, docs/protocol.md §5): everything that reaches another machine
or serves one.

Calling out: ``hosts`` (host ids), ``hostconfig`` (hosts.json and the connection settings), ``connections``
(``HostConnections``: one link per host, and the contract rules on what a host answers), ``link`` with its
transports ``ssh_link`` and ``runtime_link``. Serving: ``relay`` (``aivault relay --stdio`` at the far end of
an ssh connection) and ``pairing`` (a paired listener's CurveZMQ keys, ZAP gate and pairing codes). Both
serving ends answer through the endpoint table (broker/endpoints.py) as ``relay`` or ``paired`` callers.

Empty on purpose: direct mode imports ``hosts`` through the endpoint table, and nothing else of this package.
"""
