"""``chat``: open questions and requests over everyday topics. The answer is new text, so a draft's help comes
from the model's habits (a distilled draft) more than from the prompt (n-gram lookup finds little)."""

from __future__ import annotations

from agent.workload.sources.base import Item, user

TASKS = (
    "What is {t}?", "Explain {t} in simple words.", "Give me three facts about {t}.",
    "Write a short story about {t}.", "Why do people care about {t}?",
    "How would you describe {t} to a friend?", "Write a short poem about {t}.",
    "What are the pros and cons of {t}?",
)
TOPICS = (
    "the moon", "rain forests", "coffee", "bicycles", "volcanoes", "the ocean", "friendship", "honey bees",
    "the internet", "chess", "music", "gardening", "winter", "trains", "libraries", "cooking pasta",
    "the sun", "elephants", "mountains", "a rainy day", "learning a language", "dogs", "cats", "bread",
    "electric cars", "the history of writing", "recycling", "sleep", "exercise", "the desert",
    "birthdays", "a city at night", "rivers", "clocks", "photography", "the stars", "football", "paper",
    "robots", "kindness", "summer holidays", "clouds", "maps", "tea", "the color blue", "snow",
    "museums", "a lighthouse", "owls", "apples", "saving money", "public speaking", "the wind",
    "board games", "bridges", "birds", "islands", "autumn leaves", "a good breakfast", "space travel",
)


def items() -> list[Item]:
    """Every task over every topic; each prompt is its own group (no material is shared between prompts)."""
    return [(text, user(text)) for topic in TOPICS for text in (task.format(t=topic) for task in TASKS)]
