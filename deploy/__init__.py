"""Deploying at a client site: the offline bundle (wheelhouse, bundle, install) and the systemd unit."""
