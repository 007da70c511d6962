"""A run: the session, the interleaved schedule, what a stage returns and records (outcomes, measurements, the
machine sampler), the params checks and make report's time estimate."""
