"""Simba NoC/NoP mesh router (issue 3). See flit.py for the shared packet layout."""
