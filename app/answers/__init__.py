"""Answers from the support team: staff answers kept in the database and indexed into the
knowledge base, so the bot answers the next customer with them."""
