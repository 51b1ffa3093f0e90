"""Generate the personal-data evaluation set: ``dev.jsonl`` and ``heldout.jsonl``.

    python tests/pii_eval/make_eval_set.py [--seed 20240611] [--n 1000] [--out tests/pii_eval]

Deterministic from the seed.  Each line is one snippet::

    {"id": "pii-0001", "genre": "chat", "text": "...", "spans": [{"type", "start", "end", "value"}]}

``value`` is the gold text ``text[start:end]``.  Snippets are customer-service chat
transcripts, emails, letters, forms and free prose; each identifier type is written in many
phrasings (label before, after or none; "the number is", "my number's", "a/c", "acct no.",
line breaks, brackets, dashes, national and international forms).  About a fifth of the
snippets are hard negatives with no spans at all (greetings and discourse words, product
codes, reference and order numbers, dates that are not birth dates, licence text, place and
organisation names); positive snippets carry such distractors too.

All values are fictional and valid where a check exists: Luhn-valid cards with brand
prefixes, mod-97 IBANs, mod-11 NHS numbers, SSNs outside the never-issued ranges, NINOs with
allowed prefixes, Ofcom drama-range UK phones (0113 496 0xxx, 020 7946 0xxx, 07700 900xxx...)
and US 555-01xx lines.  Check digits are computed here, not with python-stdnum.

Person names come from the lists below, kept by hand for this file and drawn from many
origins; they are deliberately NOT the detector's list (Faker's per-locale lists), so names
outside the detector's list are part of what is measured.

The split is fixed before any detector rule is tuned: a snippet goes to ``heldout`` when the
first byte of sha256(id) is odd, else to ``dev``.  Tune on dev only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
from pathlib import Path

SEED = 20240611
N_SNIPPETS = 1000
HERE = Path(__file__).resolve().parent

# -- people ---------------------------------------------------------------------------------

FIRST_NAMES = """
Evie Olivia Amelia Isla Ava Freya Poppy Harriet Imogen Matilda Florence Rosie Phoebe Elsie Maisie
Oliver George Harry Jack Alfie Charlie Freddie Archie Theo Arthur Toby Reuben Callum Jamie Stuart
Aoife Niamh Saoirse Ciara Roisin Siobhan Orla Eoin Cian Padraig Oisin Declan Ronan Ruairi
Eilidh Morag Catriona Ailsa Hamish Fraser Lachlan Angus Murdo Iona
Rhys Dafydd Gethin Cerys Bronwen Angharad Iwan Sioned Llinos Emrys
Tomasz Piotr Krzysztof Agnieszka Katarzyna Magdalena Zofia Wojciech Bartosz Malgorzata
Chidi Chiamaka Ngozi Emeka Adebayo Folake Tunde Oluwaseun Funmilayo Ifeoma Chukwuemeka Temitope
Kwame Kofi Ama Akua Yaw Kwabena Abena Efua Kojo
Priya Anjali Kavita Sunita Rohan Aditya Arjun Vikram Deepak Lakshmi Harpreet Gurpreet Manpreet
Imran Bilal Ayesha Zainab Fatima Hamza Usman Saima Nadia Tariq
Wei Jing Xiaoming Yan Hui Ling Jun Mei
Linh Thanh Minh Huong Duc Trang
Min-jun Seo-yeon Ji-woo Hyun-woo Soo-ah
Hiroshi Yuki Kenji Haruka Sakura Takeshi
Omar Khalid Layla Mariam Yousef Rania Samir Leila
Mehmet Elif Emre Zeynep Burak Ayse
Mateo Santiago Lucia Camila Valentina Alejandro Carmen Javier Paloma
Joao Beatriz Tiago Ines Goncalo
Giulia Alessandro Francesca Matteo Chiara Lorenzo
Amelie Mathieu Camille Benoit Sylvie Juliette
Lukas Jonas Annika Matthias Katrin Sebastian
Astrid Sigrid Lars Nils Ingrid Freja Bjorn Henrik
Abdirahman Hodan Farhiya Ayaan
Shanice Tyrone Jermaine Latoya Marcia Desmond
Dimitris Eleni Nikos Sofia
Olga Irina Dmitri Svetlana Alexei
Grace Hope Joy Rose May
""".split()

LAST_NAMES = """
Hill Hall Green Brown Young King Rose Wood White Black Long Bird Fox Bell Marsh Field Moss Stone
Brook Lane Baker Cook Mason Fisher Parsons Hunter Bishop Church Little Wise Gold Sharp Love Day
Frost Snow Winter Summers Price Cross Park Lee Moon Rich Hope Page Best Strong Swift
Smith Jones Taylor Williams Davies Evans Thomas Roberts Walker Wright Robinson Thompson Hughes
Edwards Clarke Turner Collins Harrison Morgan Griffiths Pemberton-Hargreaves Ashworth Whitlock
Byrne Murphy Kelly O'Sullivan Walsh O'Brien McCarthy Doyle Gallagher Quinlan Ni Bhriain
MacDonald McAllister Campbell Stewart Fraser MacLeod Robertson Sinclair
Llewellyn Pritchard Vaughan Prosser Jenkins
Nowak Kowalczyk Wisniewski Zielinski Lewandowski Wojcik Kaminska
Okafor Adeyemi Okonkwo Balogun Eze Nwosu Oyelaran Adebanjo Chukwu
Mensah Asante Owusu Boateng Appiah Osei
Patel Sharma Gupta Singh Kaur Iyer Reddy Chaudhry Banerjee Nair
Khan Hussain Rahman Qureshi Malik Chaudhary Butt Siddiqui
Wang Zhang Liu Chen Huang Zhao Lin
Nguyen Tran Pham Le Hoang Vu
Kim Park Choi Jung Kang
Tanaka Suzuki Watanabe Yamamoto Nakamura
Haddad Mansour Khoury Nasser Farouk
Yilmaz Demir Kaya Ozturk Celik
Garcia Fernandez Lopez Martinez Delgado Castellano Romero Navarro
Silva Ferreira Oliveira Costa Carvalho
Rossi Bianchi Esposito Ricci Romano
Dubois Lefebvre Moreau Laurent Girard
Muller Schmidt Schneider Fischer Becker
Lindqvist Andersson Johansson Haugen Nielsen
Abdi Warsame Farah Hassan
Campbell Reid Ellis Francis Bailey
Papadopoulos Georgiou Nikolaidis
Ivanova Petrov Smirnov Volkova
""".split()

TITLES = ["Mr", "Mrs", "Ms", "Miss", "Dr", "Mx"]


class Person:
    def __init__(self, rng: random.Random):
        self.first = rng.choice(FIRST_NAMES)
        self.last = rng.choice(LAST_NAMES)
        self.title = rng.choice(TITLES)
        self.middle = rng.choice(FIRST_NAMES) if rng.random() < 0.08 else None

    @property
    def full(self) -> str:
        return f"{self.first} {self.middle} {self.last}" if self.middle else f"{self.first} {self.last}"


# -- identifiers ----------------------------------------------------------------------------

def luhn_digit(payload: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(payload)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return str((10 - total % 10) % 10)


def digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def card(rng: random.Random) -> str:
    kind = rng.choice(["visa", "visa", "mc", "mc2", "amex", "discover"])
    prefix, length = {"visa": ("4", 16), "mc": (str(rng.randint(51, 55)), 16), "mc2": (str(rng.randint(2221, 2720)), 16),
                      "amex": (rng.choice(["34", "37"]), 15), "discover": ("6011", 16)}[kind]
    payload = prefix + digits(rng, length - len(prefix) - 1)
    number = payload + luhn_digit(payload)
    style = rng.choice(["space", "space", "dash", "compact"])
    if style == "compact":
        return number
    sep = " " if style == "space" else "-"
    groups = [number[:4], number[4:10], number[10:]] if length == 15 else [number[i:i + 4] for i in range(0, 16, 4)]
    return sep.join(groups)


# Countries whose BBAN has no national check digit of its own (Belgium's and Spain's have one,
# which random digits fail: an early version of this file labelled such invalid IBANs as gold).
_IBAN_FORMATS = {"GB": ("ABCD", 14), "DE": ("", 18), "FR": ("", 23), "NL": ("ABCD", 10), "IE": ("ABCD", 14),
                 "IT": ("X", 22), "AT": ("", 16), "CH": ("", 17)}
_BANKS = ["NWBK", "BARC", "LOYD", "MIDL", "HBUK", "AIBK", "BOFI", "RABO", "INGB", "ABNA"]


def iban(rng: random.Random) -> str:
    country = rng.choice(list(_IBAN_FORMATS))
    letters, n = _IBAN_FORMATS[country]
    bank = rng.choice(_BANKS) if letters == "ABCD" else (rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") if letters else "")
    bban = bank + digits(rng, n)
    if country == "FR":  # French BBAN: 5+5+11 digits + 2-digit RIB key: keep all digits
        bban = digits(rng, 23)
    numeric = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    value = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    if rng.random() < 0.6:
        return " ".join(value[i:i + 4] for i in range(0, len(value), 4))
    return value


def nhs(rng: random.Random) -> str:
    while True:
        first9 = str(rng.randint(4, 6)) + digits(rng, 8)  # issued numbers in England start 4-6
        check = 11 - sum(int(d) * (10 - i) for i, d in enumerate(first9)) % 11
        if check == 10:
            continue
        number = first9 + ("0" if check == 11 else str(check))
        return rng.choice([f"{number[:3]} {number[3:6]} {number[6:]}"] * 3 + [number, f"{number[:3]}-{number[3:6]}-{number[6:]}"])


def ssn(rng: random.Random) -> str:
    while True:
        area = rng.randint(1, 899)
        if area != 666:
            break
    value = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
    return rng.choice([f"{value[:3]}-{value[3:5]}-{value[5:]}"] * 3 + [f"{value[:3]} {value[3:5]} {value[5:]}", value])


_NINO_FIRST = "ABCEGHJKLMNOPRSTWXYZ"
_NINO_SECOND = "ABCEGHJKLMNPRSTWXYZ"


def nino(rng: random.Random) -> str:
    while True:
        prefix = rng.choice(_NINO_FIRST) + rng.choice(_NINO_SECOND)
        if prefix not in {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}:
            break
    d = digits(rng, 6)
    suffix = rng.choice("ABCD")
    value = rng.choice([f"{prefix} {d[:2]} {d[2:4]} {d[4:]} {suffix}", f"{prefix}{d}{suffix}",
                        f"{prefix} {d[:2]} {d[2:4]} {d[4:]} {suffix}", f"{prefix}{d}{suffix}"])
    return value.lower() if rng.random() < 0.08 else value


_UK_PHONE_PREFIXES = ["0113 496 0", "0114 496 0", "0116 496 0", "0117 496 0", "0118 496 0", "0121 496 0",
                      "0131 496 0", "0141 496 0", "0151 496 0", "0161 496 0", "0191 498 0", "020 7946 0",
                      "029 2018 0"]
_US_AREAS = ["201", "212", "312", "415", "617", "713", "202", "305", "503", "720"]


def phone(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.55:  # UK geographic
        prefix = rng.choice(_UK_PHONE_PREFIXES)
        last = digits(rng, 3)
        national = prefix + last
        area, rest = national.split(" ", 1)
        return rng.choice([national, national, f"+44 {area[1:]} {rest}", f"({area}) {rest}",
                           f"+44 (0){area[1:]} {rest}", national.replace(" ", ""), f"{area} {rest.replace(' ', '')}",
                           f"+44{national[1:].replace(' ', '')}"])
    if kind < 0.7:  # UK mobile, drama range
        last = digits(rng, 3)
        return rng.choice([f"07700 900{last}", f"07700 900 {last}", f"+44 7700 900{last}", f"07700900{last}"])
    area = rng.choice(_US_AREAS)
    line = "01" + digits(rng, 2)
    return rng.choice([f"({area}) 555-{line}", f"{area}-555-{line}", f"{area}.555.{line}", f"+1 {area} 555 {line}",
                       f"1-{area}-555-{line}", f"{area} 555 {line}"])


_EMAIL_DOMAINS = ["example.com", "example.org", "example.net", "mail.example.co.uk", "example.ac.uk", "post.example.ie"]


def email(rng: random.Random, person: Person) -> str:
    first = re.sub(r"[^a-z]", "", person.first.lower())
    last = re.sub(r"[^a-z]", "", person.last.lower())
    local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}", f"{last}.{first[0]}",
                        f"{first}_{last}", f"{first}+orders", f"{first}.{last}{rng.randint(70, 99)}"])
    value = f"{local}@{rng.choice(_EMAIL_DOMAINS)}"
    return value if rng.random() > 0.1 else value.capitalize()


def ip(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:
        return f"203.0.113.{rng.randint(1, 254)}"
    if kind < 0.55:
        return f"198.51.100.{rng.randint(1, 254)}"
    if kind < 0.75:
        return f"{rng.choice([81, 86, 92, 109, 151, 176])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    groups = [f"{rng.randint(0, 65535):x}" for _ in range(4)]
    return rng.choice([f"2001:db8::{groups[0]}:{groups[1]}", f"2001:db8:{groups[0]}:{groups[1]}::{groups[2]}",
                       "2001:0db8:" + ":".join(f"{rng.randint(0, 65535):04x}" for _ in range(6)),
                       f"fe80::{groups[0]}:{groups[1]}:{groups[2]}:{groups[3]}"])


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


def date(rng: random.Random, y0: int, y1: int) -> str:
    y, m, d = rng.randint(y0, y1), rng.randint(1, 12), rng.randint(1, 28)
    suffix = "th" if 11 <= d <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    return rng.choice([f"{d:02d}/{m:02d}/{y}", f"{d}/{m}/{y}", f"{d} {_MONTHS[m - 1]} {y}", f"{d}{suffix} {_MONTHS[m - 1]} {y}",
                       f"{_MONTHS[m - 1]} {d}, {y}", f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}",
                       f"{d} {_MONTHS[m - 1][:3]} {y}", f"{d:02d}-{m:02d}-{y}"])


def sort_code(rng: random.Random) -> str:
    d = digits(rng, 6)
    return rng.choice([f"{d[:2]}-{d[2:4]}-{d[4:]}", f"{d[:2]}-{d[2:4]}-{d[4:]}", f"{d[:2]} {d[2:4]} {d[4:]}", d])


def account(rng: random.Random) -> str:
    return str(rng.randint(1, 9)) + digits(rng, 7)


# -- phrasings ------------------------------------------------------------------------------
# {type} placeholders become gold spans; {sort}...{acct} inside one phrase become one
# uk_bank_account span; lower-case {ref}, {order}, ... are unlabelled distractors.

PHRASES: dict[str, list[str]] = {
    "phone": [
        "call me on {phone}", "the number is {phone}", "my number's {phone}", "Number {phone}",
        "my phone number is {phone}", "Tel: {phone}", "{phone} (mobile)", "you can ring me on {phone} after six",
        "Phone:\n{phone}", "(tel. {phone})", "mobile - {phone}", "best number to reach me is {phone}",
        "text me at {phone}", "contact number: {phone}", "{phone} is my home number", "my mobile's {phone}",
        "the number on the account is {phone}", "daytime number {phone}", "on {phone}",
        "number is {phone}, any time before 5", "or try {phone}", "T: {phone}", "whatsapp {phone}",
    ],
    "email": [
        "email me at {email}", "Email: {email}", "<{email}>", "{email} (work)", "my email's {email}",
        "e-mail - {email}", "send it to {email}", "Email address:\n{email}", "[{email}]",
        "you can reply to {email}", "contact: {email}", "the address we have is {email}", "cc {email}",
    ],
    "card": [
        "card number {card}", "Card: {card}", "the long number on the card is {card}", "{card} (Visa)",
        "paid with {card}", "card no. {card} exp 09/27", "Card number:\n{card}", "[card {card}]",
        "card - {card}", "my card is {card}", "charged to {card} yesterday", "{card} was declined",
        "debit card {card}",
    ],
    "iban": [
        "IBAN {iban}", "IBAN: {iban}", "pay into {iban}", "{iban} (IBAN)", "IBAN\n{iban}", "(IBAN {iban})",
        "IBAN - {iban}", "international account number {iban}", "the iban is {iban}", "transfer to {iban} please",
        "my IBAN's {iban}",
    ],
    "nhs_number": [
        "NHS number {nhs}", "NHS no. {nhs}", "NHS No: {nhs}", "(NHS {nhs})", "NHS number:\n{nhs}",
        "her NHS number is {nhs}", "NHS num {nhs}", "Your NHS Number - {nhs}", "{nhs} (NHS number)",
        "patient NHS {nhs}", "my nhs number's {nhs}", "NHS#{nhs}",
    ],
    "us_ssn": [
        "SSN {ssn}", "social security number {ssn}", "SSN: {ssn}", "SS# {ssn}", "{ssn} (SSN)",
        "Social Security No.\n{ssn}", "SSN - {ssn}", "[SSN {ssn}]", "my social security number is {ssn}",
        "SSN on file: {ssn}", "ssn is {ssn}",
    ],
    "uk_nino": [
        "NI number {nino}", "National Insurance number: {nino}", "NINO {nino}", "NI No. {nino}", "my NI is {nino}",
        "{nino} (NI)", "N.I. number - {nino}", "National Insurance No:\n{nino}", "[NINO {nino}]",
        "national insurance {nino}", "my NI number's {nino}", "NI: {nino}",
    ],
    "ip_address": [
        "from {ip}", "IP address {ip}", "IP: {ip}", "logged in from {ip}", "[{ip}]", "{ip} (home router)",
        "source IP\n{ip}", "client - {ip}", "the request came from {ip}", "ip {ip} was blocked", "(IP {ip})",
    ],
    "date_of_birth": [
        "DOB: {dob}", "date of birth {dob}", "born on {dob}", "born {dob}", "Date of Birth:\n{dob}",
        "D.O.B. {dob}", "my birthday is {dob}", "(DOB {dob})", "{dob} (date of birth)", "birth date - {dob}",
        "dob is {dob}", "Date of birth: {dob}",
    ],
    "uk_bank_account": [
        "sort code {sort}, account number {acct}", "Sort code: {sort}\nAccount: {acct}", "a/c {acct} s/c {sort}",
        "acct no. {acct} (sort code {sort})",
        "account {acct}", "the account number is {acct}", "a/c {acct}", "acct no. {acct}", "Account No:\n{acct}",
        "{acct} (current account)", "my account's {acct}", "bank account - {acct}", "[acct {acct}]",
        "account number: {acct}", "account no {acct}",
    ],
}
PHRASES["phone"] += ["{name}, the number is {phone}", "Number {phone}, {name}"]
PHRASES["uk_bank_account"] += ["{name}, account {acct}"]

NAME_PHRASES = {
    "chat": ["my name is {name}", "This is {name}", "I'm {name}", "it's {name} here", "{name}", "{title} {name}",
             "it's {title} {last}", "name's {name}", "{first} {last} speaking", "Customer name {name}",
             "account's in the name of {name}", "{name}, account holder", "it's for my husband, {name}",
             "the booking's under {name}"],
    "prose": ["{name} gave", "The caller, {name}, gave", "{title} {last} gave", "A customer named {name} gave",
              "{name} (account holder) gave", "On behalf of {name}, her son gave", "We spoke to {name}, who gave",
              "FAO {name}: the customer gave", "{name} rang back and gave", "Attn: {name}. The customer gave",
              "Signed: {name}. The form gave", "Customer {name} gave", "Later {title} {name} gave"],
}
SIGNATURE_PHRASES = ["T: {phone}", "Mobile: {phone}", "{email}", "Tel {phone}", "M {phone}", "{phone}", "E: {email}"]

DISTRACTORS = [
    "Order {order} is on its way.", "Your reference is {ref}.", "Ref: {ref}", "Invoice {invoice} is attached.",
    "The appointment is on {date}.", "It was delivered {date}.", "Model {product} is out of stock.",
    "SKU {sku} has been discontinued.", "Tracking number {tracking}.", "Policy number {policy} renews soon.",
    "Ticket #{ticket} has been updated.", "The total came to £{amount}.", "Version {version} is now available.",
    "We're open 9am to 5:30pm, Monday to Friday.", "Postcode {postcode} is outside our delivery area.",
    "Flight BA {flight} leaves at {time}.", "Membership no. {policy} is active.", "Case {case} was closed on {date}.",
]
GREETINGS = ["Hiya", "Hi there", "Hello", "Hey", "Morning", "Good afternoon", "Right", "Great", "Lovely", "Perfect",
             "Brilliant", "Cheers", "Okay", "Sure", "Thanks", "Thank you", "Great stuff", "Right then", "Alright",
             "Sorry about that", "No problem", "Of course", "Absolutely", "Bear with me", "Fab", "Ta", "Wonderful"]
CHAT_LINES = [
    "how can I help today?", "let me just pull that up for you.", "I can see the order here.",
    "is there anything else I can help with?", "I'll pass that on to the team.", "that's all sorted now.",
    "I've been waiting ages for this.", "can you check the delivery date?", "it still hasn't arrived.",
    "the app keeps logging me out.", "I'd like a refund please.", "can I change the address?",
    "that's the one.", "I just need to confirm a few details.", "you should get an email shortly.",
]
LICENCE_TEXT = [
    "Licensed under the Apache License, Version 2.0 (the \"License\"); you may not use this file except in "
    "compliance with the License.",
    "Copyright (c) 2019 Example Widgets Ltd. Permission is hereby granted, free of charge, to any person "
    "obtaining a copy of this software.",
    "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.",
    "This program is free software: you can redistribute it and/or modify it under the terms of the GNU General "
    "Public License as published by the Free Software Foundation, either version 3 of the License.",
    "Distributed under the Boost Software License, Version 1.0. See LICENSE_1_0.txt.",
    "SPDX-License-Identifier: MIT",
]
PLACES = [
    "Victoria Station", "Leeds General Infirmary", "the Bank of England", "Green Park", "Grace Church Hall",
    "Kings Cross", "Wood Green", "Notting Hill", "Rose Lane", "Victoria Park", "Georgia Tech", "Amazon Web Services",
    "Royal Mail", "Marks and Spencer", "Bishop Auckland", "Church Street", "Hope Street", "Brown University",
    "King's College Hospital", "Young Vic", "Long Eaton", "Mount Pleasant sorting office",
]
COMPANIES = ["Northwind Energy", "Lakeshore Mutual", "Brightline Broadband", "Meadowbank Surgery", "Harbour Water",
             "Fairway Insurance", "Kestrel Telecom", "Oakfield Homes"]
PROSE_OPENERS = [
    "The complaint was logged on {date}.", "According to the case notes, the issue began in spring.",
    "The caller was unhappy with the response time.", "A follow-up was booked for {date}.",
    "The account was flagged for review.", "The claim was passed to the fraud team.",
]


def filler(rng: random.Random, template: str) -> str:
    values = {
        "order": lambda: rng.choice(["", "#", "no. "]) + digits(rng, rng.choice([6, 8, 10])),
        "ref": lambda: rng.choice(["REF-", "CS", "", "HC-"]) + digits(rng, rng.choice([6, 8, 10])),
        "invoice": lambda: f"INV-{rng.randint(2019, 2025)}-{digits(rng, 4)}",
        "date": lambda: date(rng, 2019, 2025), "product": lambda: f"XR{digits(rng, 2)} {digits(rng, 4)}",
        "sku": lambda: f"{rng.choice(['AB', 'KT', 'ZX'])}-{digits(rng, 4)}-{rng.choice('XYZ')}",
        "tracking": lambda: f"1Z{digits(rng, 3)}AA{digits(rng, 10)}",
        "policy": lambda: digits(rng, rng.choice([8, 9, 10])), "ticket": lambda: digits(rng, rng.choice([6, 8])),
        "amount": lambda: f"{rng.randint(1, 2000)}.{digits(rng, 2)}",
        "version": lambda: f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}.{rng.randint(0, 99)}",
        "postcode": lambda: f"{rng.choice(['LS', 'M', 'B', 'EH', 'CF'])}{rng.randint(1, 20)} {rng.randint(1, 9)}{rng.choice('ABDEFG')}{rng.choice('HJLNPQ')}",
        "flight": lambda: digits(rng, 4), "time": lambda: f"{rng.randint(6, 22):02d}:{rng.choice(['05', '30', '45'])}",
        "case": lambda: f"{rng.choice(['LM', 'HD', 'CX'])}-{digits(rng, 6)}",
        "company": lambda: rng.choice(COMPANIES), "place": lambda: rng.choice(PLACES),
    }
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)](), template)


class Snippet:
    """Text built piece by piece, with gold spans recorded as the pieces are added."""

    def __init__(self):
        self.parts: list[str] = []
        self.spans: list[dict] = []
        self.length = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def span(self, entity_type: str, value: str) -> None:
        self.spans.append({"type": entity_type, "start": self.length, "end": self.length + len(value), "value": value})
        self.add(value)

    def phrase(self, rng: random.Random, template: str, person: Person) -> None:
        """Render one phrasing; a sort code and account in one phrase form one gold span."""
        bank_start = None
        for piece in re.split(r"(\{\w+\})", template):
            m = re.fullmatch(r"\{(\w+)\}", piece)
            if not m:
                self.add(piece)
                continue
            key = m.group(1)
            if key in ("sort", "acct") and "{sort}" in template:
                if bank_start is None:
                    bank_start = self.length
                    self.add(sort_code(rng) if key == "sort" else account(rng))
                else:
                    self.add(sort_code(rng) if key == "sort" else account(rng))
                    end = self.length
                    text = "".join(self.parts)
                    self.spans.append({"type": "uk_bank_account", "start": bank_start, "end": end,
                                       "value": text[bank_start:end]})
                continue
            value_type, value = render(rng, key, person)
            if value_type:
                self.span(value_type, value)
            else:
                self.add(value)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def render(rng: random.Random, key: str, person: Person) -> tuple[str | None, str]:
    if key == "name":
        return "person_name", person.full
    if key == "first":
        return "person_name", person.first
    if key == "last":
        return "person_name", person.last
    if key == "title":
        return None, person.title
    makers = {"phone": ("phone", lambda: phone(rng)), "email": ("email", lambda: email(rng, person)),
              "card": ("card", lambda: card(rng)), "iban": ("iban", lambda: iban(rng)),
              "nhs": ("nhs_number", lambda: nhs(rng)), "ssn": ("us_ssn", lambda: ssn(rng)),
              "nino": ("uk_nino", lambda: nino(rng)), "ip": ("ip_address", lambda: ip(rng)),
              "dob": ("date_of_birth", lambda: date(rng, 1935, 2005)), "acct": ("uk_bank_account", lambda: account(rng))}
    entity_type, make = makers[key]
    return entity_type, make()


# -- genres -----------------------------------------------------------------------------------

ID_TYPES = ["phone", "email", "card", "iban", "nhs_number", "us_ssn", "uk_nino", "ip_address", "date_of_birth",
            "uk_bank_account"]


def pick_facts(rng: random.Random) -> list[str]:
    k = rng.choice([1, 1, 2, 2, 3])
    return [rng.choice(ID_TYPES) for _ in range(k)]


def fact(rng: random.Random, snip: Snippet, entity_type: str, person: Person) -> None:
    snip.phrase(rng, rng.choice(PHRASES[entity_type]), person)


def name_phrase(rng: random.Random, snip: Snippet, person: Person, genre: str) -> None:
    snip.phrase(rng, rng.choice(NAME_PHRASES[genre]), person)


def chat(rng: random.Random, snip: Snippet, person: Person, positive: bool) -> None:
    agent = rng.choice(["Agent", "Advisor", "Support", "Support team", "Bot"])
    customer = rng.choice(["Customer", "Visitor", "You", "Caller"])
    snip.add(f"{agent}: {rng.choice(GREETINGS)}, {rng.choice(CHAT_LINES)}\n")
    snip.add(f"{customer}: {rng.choice(GREETINGS)}, {rng.choice(CHAT_LINES)}\n")
    if positive:
        snip.add(f"{agent}: {rng.choice(['Right', 'Great', 'Okay', 'Lovely', 'Sure'])}, can I take your name and a few details?\n")
        snip.add(f"{customer}: ")
        if rng.random() < 0.8:
            name_phrase(rng, snip, person, "chat")
            snip.add(", ")
        for t in pick_facts(rng):
            fact(rng, snip, t, person)
            snip.add(rng.choice([", ", ". ", "\n" + customer + ": ", " and "]))
        snip.add("\n")
    snip.add(f"{agent}: {rng.choice(GREETINGS)}, {filler(rng, rng.choice(DISTRACTORS))}\n")
    snip.add(f"{customer}: {rng.choice(GREETINGS)}, {rng.choice(CHAT_LINES)}")


def email_genre(rng: random.Random, snip: Snippet, person: Person, positive: bool) -> None:
    company = rng.choice(COMPANIES)
    snip.add(f"Subject: {rng.choice(['Re: your query', 'Change of details', 'Refund request', 'Account update'])}\n\n")
    if positive and rng.random() < 0.5:
        snip.add(rng.choice(["Hi ", "Dear ", "Hello "]))
        snip.span("person_name", rng.choice(FIRST_NAMES))
        snip.add(",\n\n")
    else:
        snip.add(rng.choice(["Hi there,", "Hello,", "Dear Sir or Madam,", "Hiya,", "Morning all,"]) + "\n\n")
    snip.add(filler(rng, rng.choice(DISTRACTORS)) + " ")
    if positive:
        snip.add("Please update my details: ")
        for t in pick_facts(rng):
            fact(rng, snip, t, person)
            snip.add(rng.choice(["; ", ". ", "\n", ", "]))
        snip.add("\n\n" + rng.choice(["Kind regards,", "Thanks,", "Best wishes,", "Cheers,", "Many thanks,"]) + "\n")
        if rng.random() < 0.7:
            snip.span("person_name", person.full)
        else:
            snip.span("person_name", person.first)
        if rng.random() < 0.5:
            snip.add("\n")
            snip.phrase(rng, rng.choice(SIGNATURE_PHRASES), person)
    else:
        snip.add(rng.choice(CHAT_LINES).capitalize() + "\n\nKind regards,\n" + f"The {company} team")


def letter(rng: random.Random, snip: Snippet, person: Person, positive: bool) -> None:
    snip.add(f"{rng.choice(COMPANIES)}\n{rng.randint(1, 200)} {rng.choice(['High Street', 'Station Road', 'Church Lane', 'Park Avenue'])}\n")
    snip.add(filler(rng, "{postcode}") + "\n\n" + filler(rng, "{date}") + "\n\n")
    if positive:
        snip.add(f"Dear {person.title} ")
        snip.span("person_name", person.last)
        snip.add(",\n\n" + filler(rng, "Re: {ref}") + "\n\n")
        snip.add("We write to confirm the details we hold for you. ")
        for t in pick_facts(rng):
            fact(rng, snip, t, person)
            snip.add(rng.choice([". ", "; ", ".\n", ", "]))
    else:
        snip.add("Dear Customer,\n\n" + filler(rng, "Re: {ref}") + "\n\n")
        snip.add(filler(rng, rng.choice(DISTRACTORS)) + " " + filler(rng, rng.choice(DISTRACTORS)))
    snip.add("\n\nYours sincerely,\n\n" + rng.choice(["Customer Services", "Accounts Team", "The Claims Team"]))


FORM_LABELS = {
    "phone": ["Phone", "Telephone", "Mobile", "Contact number", "Tel"],
    "email": ["Email", "E-mail address", "Email address"],
    "card": ["Card number", "Card no.", "Payment card"],
    "iban": ["IBAN", "Bank (IBAN)"],
    "nhs_number": ["NHS number", "NHS No."],
    "us_ssn": ["SSN", "Social Security Number"],
    "uk_nino": ["National Insurance number", "NI number", "NINO"],
    "ip_address": ["IP address", "Last login IP"],
    "date_of_birth": ["Date of birth", "DOB", "D.O.B."],
    "uk_bank_account": ["Account number", "Bank account", "Acct no."],
}


def form(rng: random.Random, snip: Snippet, person: Person, positive: bool) -> None:
    snip.add(rng.choice(["APPLICATION FORM", "Change of details", "Patient registration", "Claim form",
                         "Direct Debit instruction"]) + "\n")
    snip.add(filler(rng, "Form ref: {ref}\n"))
    if positive:
        label = rng.choice(["Full name", "Name", "Applicant", "Account holder", "Patient name"])
        snip.add(f"{label}: ")
        if rng.random() < 0.15:
            snip.span("person_name", f"{person.last.upper()}, {person.first}")
        else:
            snip.span("person_name", person.full)
        snip.add("\n")
        for t in pick_facts(rng):
            if rng.random() < 0.5:
                sep = rng.choice([": ", ":\n", " - ", ": "])
                snip.add(rng.choice(FORM_LABELS[t]) + sep)
                key = {"phone": "phone", "email": "email", "card": "card", "iban": "iban", "nhs_number": "nhs",
                       "us_ssn": "ssn", "uk_nino": "nino", "ip_address": "ip", "date_of_birth": "dob",
                       "uk_bank_account": "acct"}[t]
                snip.phrase(rng, "{" + key + "}", person)
            else:
                fact(rng, snip, t, person)
            snip.add("\n")
    snip.add(filler(rng, rng.choice(["Date received: {date}\n", "Date of visit: {date}\n", "Start date: {date}\n"])))
    snip.add(filler(rng, "Office use: {case}\n") + "Signature: ____________")


def prose(rng: random.Random, snip: Snippet, person: Person, positive: bool) -> None:
    snip.add(filler(rng, rng.choice(PROSE_OPENERS)) + " ")
    if positive:
        name_phrase(rng, snip, person, "prose")
        snip.add(" these details: ")
        for t in pick_facts(rng):
            fact(rng, snip, t, person)
            snip.add(rng.choice([", ", "; ", ". ", " and "]))
        snip.add(filler(rng, rng.choice(DISTRACTORS)) + " ")
    snip.add(f"The meeting was held near {rng.choice(PLACES)}. " + filler(rng, rng.choice(DISTRACTORS)))


def negative_extra(rng: random.Random, snip: Snippet) -> None:
    snip.add("\n" + rng.choice(LICENCE_TEXT + [filler(rng, d) for d in DISTRACTORS]))


GENRES = {"chat": chat, "email": email_genre, "letter": letter, "form": form, "prose": prose}
GENRE_WEIGHTS = {"chat": 0.28, "email": 0.2, "letter": 0.14, "form": 0.18, "prose": 0.2}


def make_snippet(seed: int, index: int) -> dict:
    rng = random.Random(f"{seed}:{index}")
    genre = rng.choices(list(GENRE_WEIGHTS), weights=list(GENRE_WEIGHTS.values()))[0]
    positive = rng.random() >= 0.2
    snip = Snippet()
    GENRES[genre](rng, snip, Person(rng), positive)
    if not positive or rng.random() < 0.3:
        negative_extra(rng, snip)
    text = snip.text
    for s in snip.spans:
        assert text[s["start"]:s["end"]] == s["value"], s
    return {"id": f"pii-{index:04d}", "genre": genre, "text": text, "spans": snip.spans}


def split_of(snippet_id: str) -> str:
    return "heldout" if hashlib.sha256(snippet_id.encode()).digest()[0] % 2 else "dev"


def generate(seed: int = SEED, n: int = N_SNIPPETS) -> dict[str, list[dict]]:
    splits: dict[str, list[dict]] = {"dev": [], "heldout": []}
    for i in range(n):
        snippet = make_snippet(seed, i)
        splits[split_of(snippet["id"])].append(snippet)
    return splits


def write(splits: dict[str, list[dict]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--n", type=int, default=N_SNIPPETS)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    splits = generate(args.seed, args.n)
    write(splits, args.out)
    print({k: len(v) for k, v in splits.items()})


if __name__ == "__main__":
    main()
