"""PostgreSQL installs: found on the machine, downloaded (the npm packages) or built from source, cached."""
