"""Handing a conversation to a person: when (a request for a person read by app/decisions,
the model's `request_human`, the turns' outcomes, 👎), what the client is told (notices,
office hours), what staff get (the card), and the handoff's life in the database (store)
— tied together by HandoffService. Core code: no FastAPI, no Telegram; the adapters give
it a `Messenger` to reach chats outside the service."""
