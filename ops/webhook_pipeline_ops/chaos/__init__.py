"""The chaos run: the traffic it sends, the faults it injects and the reconciliation that proves
nothing was lost, double-applied or applied out of order."""
