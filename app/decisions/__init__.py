"""What a message is, decided in one place before any model reads it: a request for a
person, small talk, a question, or a wish to have the bot back; and its language.
See `decider.MessageDecider`."""
