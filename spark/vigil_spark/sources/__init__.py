"""Where the report's input comes from: Kafka topics read as batch DataFrames."""
