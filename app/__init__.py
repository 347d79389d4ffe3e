"""Customer-support chatbot service: agent core, persistence, HTTP adapter."""
