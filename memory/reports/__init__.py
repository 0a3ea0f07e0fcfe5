"""Read models for the staff pages: what people look at, never what agents are served.

Modules: ``browse`` (thread lists with counts, a thread's records as stored), ``quality`` (the quality
dashboard's figures over a time-bucketed window).
"""
