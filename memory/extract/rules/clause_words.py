"""Offline rule extractor, part 4a: the word lists the clause rule reads
(``clauses``) — which verbs are about a life and which about the
conversation, which states pass, which words only the conversation explains."""

from __future__ import annotations

import re

from memory.extract.rules.lexicon import ADJECTIVES, RELATIONS


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Verbs of the conversation itself, not of the speaker's life: "I think",
# "I see what you mean", "I thought it was a κ", "I was wondering", "I posted".
TALK_VERBS = words(
    "think thinks thought thinking guess guessed guessing mean meant meaning see saw seeing "
    "seen wonder wondered wondering suppose supposed supposing reckon imagine imagined believe "
    "agree agreed disagree hope hoped hoping assume assumed assuming bet doubt remember forgot "
    "forget understand understood notice noticed realise realised realize realized wish wished "
    "want wanted need needed hear heard say said saying tell told telling ask asked asking "
    "mention mentioned suggest suggested recommend recommended appreciate appreciated apologise "
    "apologize expect expected promise promised feel feeling look looked looking check checked "
    "checking post posted attach attached upload uploaded share shared find misread refer "
    "referred referring argue argued answer answered reply replied quote quoted cite cited "
    "kidding joking figure figured confirm confirmed count counted tried try trying hate hated "
    "love loved like liked get got getting go goes going went come came coming let leave left "
    "stand thank thanks apologise welcome noted note added add edit edited fixed fix missed "
    "miss know knew known consider considered considering talked talk talking interpolating "
    "interpolate guessing care mind bother suspect suspected am glad sorry sure meant put "
    "took take taking give gave giving seem seems seemed recognize recognizes recognise "
    "recognises spot spots spotted keep keeps"
)
# Of those, the ones that still say something with a real object:
# "I love pottery", "I went to a support group", "I got a puppy", "I took the kids to the museum".
KEPT_WITH_OBJECT = words("love loved like liked went got took")
MODALS = words(
    "would could should might must may 'd wouldn't couldn't shouldn't mightn't mustn't shall "
    "ought will 'll gonna wanna gotta won't"
)
# The verbs a negation or a "can" may keep: abilities and habits that stay true
# ("I don't read greek", "I can't drive"), not "I don't know" or "I can't see".
DURABLE_VERBS = words(
    "read speak write eat drink drive smoke own play work live use watch cook bake code "
    "program swim dance sing draw paint knit sew ride run teach study research travel fly "
    "have do drink sleep celebrate believe vote follow practice practise train"
)
# A state of the moment after "I'm" / "I was": nothing durable follows.
PASSING = words(
    "tired exhausted sleepy hungry thirsty sick ill bored busy sorry sure unsure certain "
    "confident convinced positive afraid glad happy sad upset angry mad annoyed confused "
    "curious lost stuck done ready fine ok okay good great well alright back off away here "
    "there home late early free available around online offline awake asleep gonna going "
    "about kidding joking serious honest wrong right correct aware excited thrilled stoked "
    "nervous worried scared terrified relieved jealous impressed amazed shocked surprised "
    "intrigued tempted inclined pleased delighted grateful thankful blessed lucky proud "
    "hyped pumped keen eager looking trying wondering thinking guessing referring talking "
    "saying asking hoping planning able unable new familiar unfamiliar interested fascinated "
    "obsessed split torn 100% just"
)
# Passing words that hold a fact when something follows them:
# "I'm thrilled to make a family for kids who need one".
KEEP_WITH_CONTENT = words(
    "excited thrilled stoked proud grateful thankful blessed lucky interested fascinated "
    "obsessed passionate familiar new planning hoping looking trying"
)
DEICTIC = words(
    "it it's its this that these those them there here what how why which who whom whatever "
    "whoever such"
)
SECOND_PERSON = re.compile(
    r"(?<![\w'])(?:you|your|yours|yourself|u|ur|ya|y'all|yall)(?![\w'])", re.IGNORECASE
)
CONTENT_STOP = words(
    "the and for with from about that them they their theirs there then than too not all any "
    "some one out off over into onto upon way lot lots much more most very really just also "
    "still even well now got get doing being been have has had was were are is will can "
    "does did this these those what when where which while who how why its it's such some "
    "thing things stuff kind sort bit little like gonna wanna gotta others"
)
IRREGULAR_PAST = words(
    "was were had did went came made took got gave saw ran began wrote read met grew found "
    "left lost won bought brought built caught chose drew drove fell felt fought flew forgot "
    "hid held kept knew led lent lit paid put quit rode rang rose sang sat sent set shook "
    "shot shut slept sold spent spoke stood stole struck swam taught thought threw told "
    "understood woke wore became broke dug fed hung heard laid meant sank sought sprang stuck "
    "stung swore swept swung tore wept withdrew"
)
PARTICIPLES = words(
    "been seen done gone known taken given written spoken eaten driven ridden grown drawn "
    "flown shown sung swum begun broken chosen forgotten gotten hidden stolen worn thrown"
)
ADVERBS = words(
    "just also really still recently finally actually always usually often mostly even now "
    "currently already never sometimes totally kinda basically genuinely truly definitely "
    "absolutely seriously personally generally mainly primarily only originally occasionally "
    "regularly rarely too once sure rly def likewise completely somewhat probably maybe "
    "perhaps certainly simply"
)
# "-ly" words that are verbs, not adverbs.
LY_VERBS = words("apply rely reply supply fly ally bully tally")
INTENSIFIERS = words("pretty quite very so too really super currently kinda kind sort rather")
# "My sense is that …", "my guess is …", "my hat's off to …": not about the member.
BAD_MY_KEYS = words(
    "sense guess bet point question questions thought thoughts opinion feeling impression "
    "understanding take reading readings hunch idea ideas suggestion concern worry apologies "
    "apology bad pleasure hope hopes hat two cents 2 mistake fault turn reaction response "
    "answer comment comments message post reply eyes gut god goodness lord head mind brain "
    "screen image images pic picture photo link suspicion best"
)
# What a clause may end on but a fact may not: "…a variety of tools to".
TRAILING = words("to of for and or the a an with on in at as but so like by from about because")
LANGUAGES = re.compile(
    r"\b(greek|latin|english|german|french|spanish|italian|russian|japanese|chinese|arabic|"
    r"hebrew|coptic|aramaic|syriac|sanskrit|dutch|portuguese|polish|korean|turkish|swedish)\b"
)
RELATION = re.compile(rf"^(?:{RELATIONS}s?|family|fam|kids|husband|wife)$", re.IGNORECASE)
DURABLE_ADJECTIVE = re.compile(rf"^{ADJECTIVES}$", re.IGNORECASE)
