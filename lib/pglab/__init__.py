"""pglab: reproducible PostgreSQL performance studies."""
