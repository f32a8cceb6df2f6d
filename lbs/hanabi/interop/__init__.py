"""Interoperation: the HLE bridge and rl_env players, the differential tester, game records,
hanab.live replays and readable text traces. HLE itself is imported only when used."""
