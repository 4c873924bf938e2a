"""The local web page (``aivault web``): search, a session's messages, and the Agent Session History settings.

``app`` holds the endpoints, ``guard`` the trust guard every request passes first, ``server`` binds
loopback and runs uvicorn; ``static/`` is the page itself (HTML, one script, one style sheet, no
build step). Importing this package imports none of them.
"""
