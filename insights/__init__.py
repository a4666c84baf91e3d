"""What the stored history tells the operator: usage per day, hour, persona, model and user; the questions the guide
could not answer, grouped; the documents used and never used; as a page (`web.operator`), CSV, JSON and
`python -m insights`."""
