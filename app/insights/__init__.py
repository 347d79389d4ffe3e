"""What operators act on: turns' outcomes over time and the knowledge-gap report (the
questions the bot did not answer, grouped by topic). Core code: no FastAPI, no Telegram."""
