"""Operating the platform: the local Kafka broker, topics, settings and the root CLI."""
