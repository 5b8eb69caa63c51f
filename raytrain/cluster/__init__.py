"""On-prem Ray clusters over SSH: plan (what to run where), runner (ssh/local), lifecycle (up/down/status)."""
