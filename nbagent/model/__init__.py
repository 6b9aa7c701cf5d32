"""The model seam: Claude through the SDK (``claude``), the clouds' clients (``clients``), the one retry budget (``retries``).

May import: ``state``, ``record`` and the leaves.
"""
