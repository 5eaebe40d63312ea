"""The service definition: service classes and goals, report classes, classification rules, application
environments and nodes; versioned, validated and activated atomically."""
