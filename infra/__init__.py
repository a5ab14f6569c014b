"""Operating the platform: the local Kafka broker, topics, settings, Kafka clients, the disk
queue that keeps undelivered events (the SDK's and the gateway's), and the root CLI."""
