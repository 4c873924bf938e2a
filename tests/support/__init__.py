"""What the tests share besides fixtures (those are tests/conftest.py's): the one home of test helpers.

* ``common``   -- the repository's paths, the CLI as a child process, data directories and roots, waiting,
                  child processes' logs;
* ``daemons``  -- the daemon in this process (``InprocDaemon``) and as ``aivault serve`` (``DaemonProcess``);
* ``index``    -- an index file checked and compared: its ART indexes, its content as a fingerprint;
* ``semantic`` -- the five-topic corpus of the hybrid-retrieval tests and waiting for its vectors;
* ``line_parsers``, ``mcphttp``, ``webserver``, ``remotes``, ``fake_relay`` -- a reader's resumption
  at every split, the MCP-over-HTTP and web server processes, the fake ssh remotes and their relay.

A test module imports from here, never from another test module (tests/unit/test_structure.py).
"""
