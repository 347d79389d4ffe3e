"""Handing a conversation to a person: when (triggers), what the client is told (notices,
office hours), what staff get (the card), and the handoff's life in the database (store)
— tied together by HandoffService. Core code: no FastAPI, no Telegram; the adapters give
it a `Messenger` to reach chats outside the service."""
