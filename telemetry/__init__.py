"""What the app measures of itself: memory (`memory`) and the counters and gauges `/metrics` reports (`prometheus`)."""
