"""Operator calls on a running replica: a discovery collection's rounds (:mod:`.rounds`)."""
