"""hdl package of Tessera (installed as tessera.hdl)."""
