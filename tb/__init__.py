"""tb package of Tessera (installed as tessera.tb)."""
