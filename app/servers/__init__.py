"""Servers of application environments: limits, how many each service class needs, and who gets them."""
