"""Offline checks of the deployment artefacts: the Dockerfile and charts/idemproxy."""
