"""``extract``: pull facts out of a short document (a customer email, meeting notes, an incident report, a
review, a delivery notice, a lease notice) and quote it. Names, dates and sentences of the answer come from
the prompt, the framing around them does not: speculation pays between ``chat`` and ``edit``.

Documents are written from templates with fills drawn by a seeded generator, so the set is the same on every
run."""

from __future__ import annotations

import random

from agent.workload.sources.base import Item, user

PEOPLE = ("Maria Lopez", "James Chen", "Aisha Khan", "Tom Becker", "Priya Nair", "Lukas Meyer", "Sofia Rossi",
          "Daniel Okafor", "Emma Svensson", "Kenji Watanabe", "Fatima Haddad", "Oliver Grant", "Chloe Martin",
          "Ravi Patel", "Hannah Weiss", "Mateo Silva")
COMPANIES = ("Northwind Traders", "Bluebird Logistics", "Acme Analytics", "Greenleaf Foods", "Harbor Dental",
             "Summit Outdoor", "Pixel Forge", "Riverside Clinic", "Oakridge Bank", "Brightside Energy")
PRODUCTS = ("the X200 router", "the standing desk", "the espresso machine", "the noise-cancelling headphones",
            "the 27-inch monitor", "the robot vacuum", "the trail running shoes", "the smart thermostat")
CITIES = ("Lisbon", "Toronto", "Nairobi", "Osaka", "Leeds", "Denver", "Hamburg", "Melbourne", "Pune", "Lyon")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
SERVICES = ("checkout", "login", "search", "payments API", "image upload", "email notifications")

DOCUMENTS = {
    "email": ("Subject: Order {order} – {product}\n\nHello,\n\nI ordered {product} on {date1} (order {order}) "
              "and paid {amount}. It arrived on {date2} with a cracked panel. {person2} from your support team "
              "told me on the phone that \"a replacement will ship within five working days\", but nothing has "
              "arrived. I would like either the replacement or a full refund by {date3}.\n\nRegards,\n{person1}"),
    "meeting": ("Meeting notes – {company}, {date1}\nPresent: {person1}, {person2}, {person3}\n\n"
                "1. Budget: {person1} said \"we are {percent}% over on travel and need to cut it this quarter\". "
                "The team agreed to freeze travel until {date2}.\n2. Hiring: {person2} will open two roles in "
                "{city}; the first interviews start on {date3}.\n3. Office move: {person3} reported that the "
                "new lease costs {amount} a month. Decision postponed.\nNext meeting: {date4}."),
    "incident": ("Incident report INC-{order}\nService: {service}\nStarted: {date1}, {time1} UTC. Resolved: "
                 "{time2} UTC.\nImpact: about {percent}% of requests failed in {city} for {minutes} minutes.\n"
                 "Cause: a configuration change deployed by {person1} lowered the connection pool from 200 to "
                 "20. {person2} wrote in the channel: \"rolling back the pool size now\".\nFollow-up: add a "
                 "check on pool settings before deploys (owner: {person2}, due {date2})."),
    "review": ("Review of {product}, {stars} out of 5 stars, by {person1} ({city}), {date1}\n\n"
               "I have used it every day for {minutes} days. Setup took ten minutes and the manual is clear. "
               "The battery is the weak point: \"it lasts about half of what the box promises\". Customer "
               "service answered within a day and offered a discount of {percent}%. At {amount} I expected "
               "more, but I would still recommend it to a friend."),
    "delivery": ("Delivery notice from {company}\n\nDear {person1},\n\nYour parcel {order} containing {product} "
                 "left our {city} depot on {date1}. Our driver tried to deliver it on {date2} but nobody was "
                 "home. We will try once more on {date3} between 9:00 and 13:00. If that fails, the parcel "
                 "will wait at the depot until {date4}; after that it goes back to the sender. A redelivery "
                 "fee of {amount} applies. Questions? Ask for {person2} at the depot."),
    "lease": ("Notice to tenants, {company}\n\nFrom {date1}, the rent for flat {order} in {city} will rise by "
              "{percent}% to {amount} a month. {person1}, the property manager, said: \"the increase covers the "
              "new heating system installed in {month}\". Tenants who object must write to {person2} before "
              "{date2}. The annual inspection will take place on {date3}; please make sure someone is home."),
}
TASKS = (
    "List every date and money amount in the text below as bullet points. After each one, quote the sentence "
    "it comes from.\n\n{doc}",
    "Summarise the text below in two sentences. Then quote, word for word, the sentence that matters most."
    "\n\n{doc}",
    "Who is named in the following text? For each person, give their role and quote what they said or did."
    "\n\n---\n{doc}\n---",
    "{doc}\n\nExtract the key facts from the text above as JSON with the keys \"people\", \"dates\", "
    "\"amounts\" and \"quotes\" (quotes copied exactly).",
)
FILLS_PER_KIND = 11


def _fill(rng: random.Random) -> dict[str, str]:
    people = rng.sample(PEOPLE, 3)
    dates = sorted(rng.sample(range(1, 29), 4))
    month = rng.randrange(12)
    return {
        "person1": people[0], "person2": people[1], "person3": people[2],
        "company": rng.choice(COMPANIES), "product": rng.choice(PRODUCTS), "city": rng.choice(CITIES),
        "service": rng.choice(SERVICES), "order": str(rng.randint(10000, 99999)),
        "amount": f"{rng.choice(('€', '$', '£'))}{rng.randint(12, 2400)}.{rng.randint(0, 99):02d}",
        "percent": str(rng.randint(3, 40)), "minutes": str(rng.randint(7, 95)), "stars": str(rng.randint(2, 5)),
        "month": MONTHS[month - 1], "time1": f"{rng.randint(0, 21):02d}:{rng.randint(0, 59):02d}",
        "time2": f"{rng.randint(22, 23):02d}:{rng.randint(0, 59):02d}",
        **{f"date{i + 1}": f"{d} {MONTHS[(month + i // 3) % 12]} 2025" for i, d in enumerate(dates)},
    }


def items() -> list[Item]:
    """FILLS_PER_KIND documents of each kind, each asked three of the tasks (rotating); the document is the
    group."""
    rng = random.Random(31)
    found = []
    for kind, template in DOCUMENTS.items():
        for i in range(FILLS_PER_KIND):
            doc = template.format(**_fill(rng))
            for j in range(3):
                found.append((doc, user(TASKS[(i + j) % len(TASKS)].format(doc=doc))))
    return found
