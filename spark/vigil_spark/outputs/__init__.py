"""The report's outputs from the model: summaries (stdout, JSON, ConsumerGroup status.report) and the HTML report."""
