"""Engines behind one small interface, the request cache, and Ray Serve deployments."""
