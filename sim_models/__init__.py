"""sim_models package of Tessera (installed as tessera.sim_models)."""
