"""Framework adapters (TRL, verl, OpenRLHF): pluggy plugins registered under the `rlvr_schedule` entry-point group."""
