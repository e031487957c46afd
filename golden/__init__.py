"""golden package of Tessera (installed as tessera.golden)."""
