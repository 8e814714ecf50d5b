"""Write the v3 study's forgetting suite: four-way multiple-choice items of everyday facts in
families the base model scores 0.4 to 0.85 on (issue 44: forgetting with room to move).

    python studies/make_facts_mc_v3.py --all      # studies/data/facts-mc-v3-candidates.jsonl: every family
    python studies/make_facts_mc_v3.py            # studies/data/facts-mc-v3.jsonl: the families in KEPT

The same bytes every time (seeded). The candidates are v1's six families
(studies/make_facts_mc.py, their word lists unchanged), the pilot's seventeen below, and the
extension's nineteen after them. The base-only pilot (studies/pilot_v3.py, results/pilot-v3/pilot.md)
scored the base on the first 744 candidate items: 268 items in the band, short of 600. The
extension's families were written after those scores were read, and scored by the same rule with
studies/score_facts_v3.py (results/pilot-v3/facts-v3-extension.json), which also scored again the
pilot's families whose items changed when a distractor that may also be right was refused (below).
KEPT lists the families whose latest base accuracy lies in [0.4, 0.85], the rule written before
the pilot's scores were read, unchanged, so that the suite has room to fall and to rise.

A distractor is never a case or singular/plural variant of the right answer ("eye" for "eyes"),
nor an answer the family's CLASHES list as possibly right beside it ("metal" for a nail's "steel").

Licence: the word lists below and the files they make were written for evalkit and are
dedicated to the public domain (CC0 1.0); no item is taken from a published benchmark. None is
about numbers or arithmetic (the training tasks). Each item is a cloze in lm-eval's format
("Question: ...\\nAnswer:"), its right choice and three distractors drawn (seeded) from the same
family's answers, in a seeded order; scored by log-likelihood (evalkit.forgetting.multiple_choice),
chance 0.25.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import make_facts_mc as v1

HERE = Path(__file__).parent
# the families kept (latest base accuracy in [0.4, 0.85]): the pilot's ten (results/pilot-v3/pilot.md; six of
# them scored again after their items changed, all still in the band) and sixteen of the extension's nineteen
# (results/pilot-v3/facts-v3-extension.json; language2, capital2 and workplace score above 0.85): 870 items
KEPT: tuple[str, ...] = ("animal", "body", "continent", "continent2", "currency", "dish", "female", "group", "home",
                         "instrument", "kind", "landmark", "madefrom", "male", "material", "people", "planet",
                         "season", "shape", "sound", "space", "sport", "symbol", "synonym", "young", "young2")

PLURALS = [("mouse", "mice"), ("child", "children"), ("foot", "feet"), ("tooth", "teeth"), ("man", "men"),
           ("woman", "women"), ("goose", "geese"), ("person", "people"), ("leaf", "leaves"), ("knife", "knives"),
           ("wolf", "wolves"), ("life", "lives"), ("wife", "wives"), ("half", "halves"), ("loaf", "loaves"),
           ("calf", "calves"), ("shelf", "shelves"), ("thief", "thieves"), ("ox", "oxen"), ("cactus", "cacti"),
           ("box", "boxes"), ("bus", "buses"), ("church", "churches"), ("dish", "dishes"), ("baby", "babies"),
           ("city", "cities"), ("lady", "ladies"), ("story", "stories"), ("potato", "potatoes"),
           ("tomato", "tomatoes"), ("hero", "heroes"), ("fox", "foxes"), ("glass", "glasses"), ("watch", "watches"),
           ("party", "parties"), ("berry", "berries"), ("fly", "flies"), ("key", "keys"), ("toy", "toys"),
           ("day", "days")]
PAST = [("go", "went"), ("eat", "ate"), ("see", "saw"), ("take", "took"), ("give", "gave"), ("write", "wrote"),
        ("drink", "drank"), ("swim", "swam"), ("sing", "sang"), ("run", "ran"), ("come", "came"),
        ("begin", "began"), ("bring", "brought"), ("buy", "bought"), ("think", "thought"), ("teach", "taught"),
        ("catch", "caught"), ("fight", "fought"), ("fly", "flew"), ("grow", "grew"), ("know", "knew"),
        ("throw", "threw"), ("draw", "drew"), ("drive", "drove"), ("ride", "rode"), ("speak", "spoke"),
        ("break", "broke"), ("choose", "chose"), ("freeze", "froze"), ("steal", "stole"), ("wake", "woke"),
        ("sleep", "slept"), ("keep", "kept"), ("feel", "felt"), ("leave", "left"), ("meet", "met"),
        ("sit", "sat"), ("stand", "stood"), ("tell", "told"), ("sell", "sold")]
LANGUAGES = [("France", "French"), ("Germany", "German"), ("Italy", "Italian"), ("Spain", "Spanish"),
             ("Portugal", "Portuguese"), ("Brazil", "Portuguese"), ("Mexico", "Spanish"), ("Japan", "Japanese"),
             ("China", "Chinese"), ("Russia", "Russian"), ("Greece", "Greek"), ("Turkey", "Turkish"),
             ("Poland", "Polish"), ("Sweden", "Swedish"), ("Norway", "Norwegian"), ("Finland", "Finnish"),
             ("Denmark", "Danish"), ("the Netherlands", "Dutch"), ("Hungary", "Hungarian"), ("Korea", "Korean"),
             ("Vietnam", "Vietnamese"), ("Thailand", "Thai"), ("Israel", "Hebrew"), ("Egypt", "Arabic"),
             ("Saudi Arabia", "Arabic"), ("Iran", "Persian"), ("England", "English"), ("Australia", "English"),
             ("Argentina", "Spanish"), ("Ukraine", "Ukrainian")]
CONTINENTS = [("France", "Europe"), ("Germany", "Europe"), ("Italy", "Europe"), ("Spain", "Europe"),
              ("Poland", "Europe"), ("Norway", "Europe"), ("Greece", "Europe"), ("Ireland", "Europe"),
              ("Japan", "Asia"), ("China", "Asia"), ("India", "Asia"), ("Thailand", "Asia"), ("Vietnam", "Asia"),
              ("Korea", "Asia"), ("Indonesia", "Asia"), ("Pakistan", "Asia"), ("Kenya", "Africa"),
              ("Nigeria", "Africa"), ("Egypt", "Africa"), ("Ghana", "Africa"), ("Ethiopia", "Africa"),
              ("Morocco", "Africa"), ("South Africa", "Africa"), ("Tanzania", "Africa"), ("Brazil", "South America"),
              ("Argentina", "South America"), ("Peru", "South America"), ("Chile", "South America"),
              ("Colombia", "South America"), ("Venezuela", "South America"), ("Canada", "North America"),
              ("Mexico", "North America"), ("the United States", "North America"), ("Cuba", "North America"),
              ("Australia", "Oceania"), ("New Zealand", "Oceania"), ("Fiji", "Oceania"), ("Samoa", "Oceania")]
YOUNG = [("dog", "puppy"), ("cat", "kitten"), ("cow", "calf"), ("horse", "foal"), ("sheep", "lamb"),
         ("goat", "kid"), ("pig", "piglet"), ("duck", "duckling"), ("goose", "gosling"), ("swan", "cygnet"),
         ("frog", "tadpole"), ("bear", "cub"), ("lion", "cub"), ("deer", "fawn"), ("kangaroo", "joey"),
         ("owl", "owlet"), ("eagle", "eaglet"), ("hen", "chick"), ("butterfly", "caterpillar"), ("fish", "fry"),
         ("seal", "pup"), ("rabbit", "kit"), ("whale", "calf"), ("elephant", "calf"), ("fox", "kit")]
SOUNDS = [("cow", "moo"), ("dog", "bark"), ("cat", "meow"), ("duck", "quack"), ("sheep", "baa"),
          ("pig", "oink"), ("horse", "neigh"), ("lion", "roar"), ("snake", "hiss"), ("owl", "hoot"),
          ("bee", "buzz"), ("frog", "croak"), ("mouse", "squeak"), ("rooster", "crow"), ("wolf", "howl"),
          ("donkey", "bray"), ("bird", "chirp"), ("hen", "cluck"), ("turkey", "gobble"), ("goose", "honk"),
          ("dove", "coo"), ("crow", "caw"), ("elephant", "trumpet"), ("bear", "growl"), ("goat", "bleat")]
MATERIALS = [("a window", "glass"), ("a brick wall", "clay"), ("a wooden table", "wood"), ("a candle", "wax"),
             ("a tyre", "rubber"), ("a sweater", "wool"), ("a book", "paper"), ("a coin", "metal"),
             ("a bottle for wine", "glass"), ("a shoe", "leather"), ("a bed sheet", "cotton"),
             ("a plastic bag", "plastic"), ("a snowman", "snow"), ("a sandcastle", "sand"), ("an igloo", "ice"),
             ("a pencil lead", "graphite"), ("a nail", "steel"), ("a cardboard box", "cardboard"),
             ("a pearl necklace", "pearls"), ("a silk scarf", "silk"), ("a clay pot", "clay"), ("bread", "flour"),
             ("cheese", "milk"), ("butter", "cream"), ("wine", "grapes"), ("paper", "wood"), ("jam", "fruit"),
             ("a statue in a park", "stone"), ("a rope", "fibre"), ("a wedding ring", "gold")]
HOMES = [("bee", "hive"), ("bird", "nest"), ("dog", "kennel"), ("horse", "stable"), ("pig", "sty"),
         ("rabbit", "burrow"), ("spider", "web"), ("bear", "den"), ("lion", "den"), ("cow", "barn"),
         ("hen", "coop"), ("fish", "pond"), ("ant", "anthill"), ("bat", "cave"), ("fox", "den"),
         ("eagle", "eyrie"), ("beaver", "lodge"), ("mole", "burrow"), ("monk", "monastery"), ("king", "palace"),
         ("sailor", "ship"), ("prisoner", "prison"), ("Eskimo in a story", "igloo"), ("nun", "convent"),
         ("soldier", "barracks")]
WORKERS = [("flies a plane", "pilot"), ("cuts hair", "barber"), ("fixes teeth", "dentist"),
           ("treats sick animals", "vet"), ("bakes bread", "baker"), ("fixes pipes", "plumber"),
           ("grows crops", "farmer"), ("teaches children", "teacher"), ("puts out fires", "firefighter"),
           ("cooks in a restaurant", "chef"), ("catches fish", "fisherman"), ("writes books", "author"),
           ("paints pictures", "painter"), ("sells meat", "butcher"), ("designs buildings", "architect"),
           ("delivers letters", "postman"), ("defends people in court", "lawyer"), ("looks after the sick", "nurse"),
           ("builds with bricks", "bricklayer"), ("works with wood", "carpenter"), ("drives a taxi", "driver"),
           ("acts in films", "actor"), ("sings songs", "singer"), ("plays the piano", "pianist"),
           ("studies the stars", "astronomer"), ("guards a building", "guard"), ("serves food", "waiter"),
           ("repairs cars", "mechanic"), ("takes photographs", "photographer"), ("makes clothes", "tailor")]
CITIES = [("Paris", "France"), ("Lyon", "France"), ("Marseille", "France"), ("Munich", "Germany"),
          ("Hamburg", "Germany"), ("Frankfurt", "Germany"), ("Milan", "Italy"), ("Venice", "Italy"),
          ("Naples", "Italy"), ("Barcelona", "Spain"), ("Seville", "Spain"), ("Valencia", "Spain"),
          ("Osaka", "Japan"), ("Kyoto", "Japan"), ("Shanghai", "China"), ("Hong Kong", "China"),
          ("Mumbai", "India"), ("Chicago", "the United States"), ("Boston", "the United States"),
          ("Los Angeles", "the United States"), ("Toronto", "Canada"), ("Vancouver", "Canada"),
          ("Sydney", "Australia"), ("Melbourne", "Australia"), ("Rio de Janeiro", "Brazil"),
          ("Sao Paulo", "Brazil"), ("Manchester", "England"), ("Liverpool", "England"), ("Edinburgh", "Scotland"),
          ("Glasgow", "Scotland"), ("St Petersburg", "Russia"), ("Istanbul", "Turkey")]
CURRENCIES = [("Japan", "yen"), ("the United States", "dollar"), ("England", "pound"), ("Germany", "euro"),
              ("France", "euro"), ("Italy", "euro"), ("Spain", "euro"), ("China", "yuan"), ("India", "rupee"),
              ("Russia", "rouble"), ("Mexico", "peso"), ("Argentina", "peso"), ("Switzerland", "franc"),
              ("South Korea", "won"), ("Brazil", "real"), ("Canada", "dollar"), ("Australia", "dollar"),
              ("Sweden", "krona"), ("Poland", "zloty"), ("Turkey", "lira"), ("Israel", "shekel"),
              ("Thailand", "baht"), ("South Africa", "rand"), ("Nigeria", "naira"), ("Vietnam", "dong")]
COMPARATIVES = [("good", "better"), ("bad", "worse"), ("big", "bigger"), ("small", "smaller"), ("fast", "faster"),
                ("slow", "slower"), ("happy", "happier"), ("easy", "easier"), ("heavy", "heavier"),
                ("funny", "funnier"), ("far", "farther"), ("little", "less"), ("many", "more"), ("hot", "hotter"),
                ("thin", "thinner"), ("wet", "wetter"), ("old", "older"), ("young", "younger"), ("strong", "stronger"),
                ("long", "longer"), ("short", "shorter"), ("tall", "taller"), ("cold", "colder"), ("warm", "warmer"),
                ("bright", "brighter"), ("dark", "darker"), ("rich", "richer"), ("poor", "poorer"),
                ("late", "later"), ("early", "earlier")]
SYNONYMS = [("big", "large"), ("small", "little"), ("quick", "fast"), ("begin", "start"), ("end", "finish"),
            ("happy", "glad"), ("sad", "unhappy"), ("angry", "mad"), ("shut", "close"), ("buy", "purchase"),
            ("help", "assist"), ("talk", "speak"), ("look", "see"), ("rich", "wealthy"), ("afraid", "scared"),
            ("smart", "clever"), ("silly", "foolish"), ("tired", "sleepy"), ("pretty", "beautiful"),
            ("hard", "difficult"), ("easy", "simple"), ("shout", "yell"), ("gift", "present"), ("road", "street"),
            ("couch", "sofa"), ("jump", "leap"), ("cry", "weep"), ("sick", "ill"), ("mistake", "error"),
            ("answer", "reply")]
BODY = [("see", "eyes"), ("hear", "ears"), ("smell", "nose"), ("taste", "tongue"), ("walk", "legs"),
        ("think", "brain"), ("breathe", "lungs"), ("chew", "teeth"), ("hold a cup", "hand"), ("kick a ball", "foot"),
        ("pump blood", "heart"), ("bend the leg", "knee"), ("bend the arm", "elbow"), ("nod", "head"),
        ("clap", "hands"), ("wink", "eye"), ("whistle", "lips"), ("digest food", "stomach"),
        ("filter blood", "kidneys"), ("wear a ring", "finger")]
OPPOSITE_NOUNS = [("king", "queen"), ("brother", "sister"), ("father", "mother"), ("son", "daughter"),
                  ("uncle", "aunt"), ("husband", "wife"), ("boy", "girl"), ("man", "woman"), ("prince", "princess"),
                  ("nephew", "niece"), ("grandfather", "grandmother"), ("actor", "actress"), ("waiter", "waitress"),
                  ("bull", "cow"), ("rooster", "hen"), ("stallion", "mare"), ("lion", "lioness"), ("duke", "duchess"),
                  ("host", "hostess"), ("groom", "bride"), ("sunrise", "sunset"), ("question", "answer"),
                  ("friend", "enemy"), ("winner", "loser"), ("teacher", "student"), ("doctor", "patient"),
                  ("buyer", "seller"), ("floor", "ceiling"), ("entrance", "exit"), ("summer", "winter")]
SEASONS = [("the season after spring", "summer"), ("the season after summer", "autumn"),
           ("the season after autumn", "winter"), ("the season after winter", "spring"),
           ("the season with snow", "winter"), ("the season when leaves fall", "autumn"),
           ("the season when flowers bloom", "spring"), ("the hottest season", "summer"),
           ("the coldest season", "winter"), ("the season of harvest", "autumn")]
BEFORE = ([(f"the day before {v1.DAYS[i]}", v1.DAYS[i - 1], v1.DAYS) for i in range(7)]
          + [(f"the month before {v1.MONTHS[i]}", v1.MONTHS[i - 1], v1.MONTHS) for i in range(12)]
          + [(f"the letter before {v1.LETTERS[i]}", v1.LETTERS[i - 1], list(v1.LETTERS)) for i in range(1, 26)])

# --- the extension (issue 44, part 5): written after the pilot's family scores were read, to reach 600
# items; scored by the same rule (results/pilot-v3/facts-v3-extension.json) ---
GROUPS = [("lions", "pride"), ("wolves", "pack"), ("wild dogs", "pack"), ("cows", "herd"), ("elephants", "herd"),
          ("sheep", "flock"), ("birds", "flock"), ("fish", "school"), ("bees", "swarm"), ("locusts", "swarm"),
          ("ants", "colony"), ("bats", "colony"), ("whales", "pod"), ("dolphins", "pod"), ("geese", "gaggle"),
          ("crows", "murder"), ("puppies born together", "litter"), ("kittens born together", "litter"),
          ("monkeys", "troop"), ("owls", "parliament"), ("ships", "fleet"), ("singers", "choir"),
          ("actors in a play", "cast"), ("players", "team"), ("grapes", "bunch"), ("keys", "bunch"),
          ("flowers tied together", "bouquet"), ("mountains", "range"), ("trees", "forest"),
          ("pupils taught together", "class"), ("thieves", "gang"), ("playing cards", "deck"), ("stairs", "flight"),
          ("eggs in a nest", "clutch"), ("chicks", "brood"), ("people in the street", "crowd"),
          ("sailors on a ship", "crew"), ("kangaroos", "mob"), ("hills in a row", "range")]
INSTRUMENTS = [("a violin", "string"), ("a cello", "string"), ("a guitar", "string"), ("a harp", "string"),
               ("a banjo", "string"), ("a viola", "string"), ("a double bass", "string"), ("a mandolin", "string"),
               ("a ukulele", "string"), ("a sitar", "string"), ("a lute", "string"), ("a flute", "woodwind"),
               ("a clarinet", "woodwind"), ("an oboe", "woodwind"), ("a bassoon", "woodwind"), ("a saxophone", "woodwind"),
               ("a recorder", "woodwind"), ("a piccolo", "woodwind"), ("a cor anglais", "woodwind"), ("a trumpet", "brass"),
               ("a trombone", "brass"), ("a tuba", "brass"), ("a French horn", "brass"), ("a bugle", "brass"),
               ("a cornet", "brass"), ("a euphonium", "brass"), ("a sousaphone", "brass"), ("a flugelhorn", "brass"),
               ("a drum", "percussion"), ("a cymbal", "percussion"), ("a xylophone", "percussion"),
               ("a tambourine", "percussion"), ("a triangle", "percussion"), ("a bongo", "percussion"),
               ("a maraca", "percussion"), ("a gong", "percussion"), ("a castanet", "percussion"),
               ("a glockenspiel", "percussion")]
LANGUAGES_MORE = [("Iceland", "Icelandic"), ("Romania", "Romanian"), ("the Czech Republic", "Czech"),
                  ("Bulgaria", "Bulgarian"), ("Lithuania", "Lithuanian"), ("Latvia", "Latvian"),
                  ("Estonia", "Estonian"), ("Albania", "Albanian"), ("Armenia", "Armenian"), ("Mongolia", "Mongolian"),
                  ("Indonesia", "Indonesian"), ("Malaysia", "Malay"), ("Cambodia", "Khmer"), ("Myanmar", "Burmese"),
                  ("Laos", "Lao"), ("Nepal", "Nepali"), ("Bangladesh", "Bengali"), ("Ethiopia", "Amharic"),
                  ("Somalia", "Somali"), ("Tanzania", "Swahili"), ("Austria", "German"), ("Liechtenstein", "German"),
                  ("Chile", "Spanish"), ("Colombia", "Spanish"), ("Cuba", "Spanish"), ("Venezuela", "Spanish"),
                  ("Uruguay", "Spanish"), ("Ecuador", "Spanish"), ("Costa Rica", "Spanish"),
                  ("Angola", "Portuguese"), ("Mozambique", "Portuguese"), ("Syria", "Arabic"), ("Jordan", "Arabic"),
                  ("Algeria", "Arabic"), ("Iraq", "Arabic"), ("Afghanistan", "Pashto"), ("Slovakia", "Slovak"),
                  ("Slovenia", "Slovenian"), ("Croatia", "Croatian"), ("Serbia", "Serbian"), ("Pakistan", "Urdu"),
                  ("Uzbekistan", "Uzbek"), ("Senegal", "French"), ("Monaco", "French"), ("Jamaica", "English"),
                  ("New Zealand", "English")]
CONTINENTS_MORE = [("Sweden", "Europe"), ("Austria", "Europe"), ("Belgium", "Europe"), ("Portugal", "Europe"),
                   ("Hungary", "Europe"), ("Romania", "Europe"), ("Finland", "Europe"), ("Denmark", "Europe"),
                   ("Croatia", "Europe"), ("Iceland", "Europe"), ("Switzerland", "Europe"),
                   ("the Czech Republic", "Europe"), ("Bulgaria", "Europe"), ("Serbia", "Europe"),
                   ("Lithuania", "Europe"), ("Nepal", "Asia"), ("Mongolia", "Asia"), ("Cambodia", "Asia"),
                   ("Laos", "Asia"), ("Malaysia", "Asia"), ("Bangladesh", "Asia"), ("Sri Lanka", "Asia"),
                   ("the Philippines", "Asia"), ("Myanmar", "Asia"), ("Afghanistan", "Asia"), ("Iraq", "Asia"),
                   ("Saudi Arabia", "Asia"), ("Syria", "Asia"), ("Senegal", "Africa"), ("Mali", "Africa"),
                   ("Angola", "Africa"), ("Zambia", "Africa"), ("Zimbabwe", "Africa"), ("Uganda", "Africa"),
                   ("Botswana", "Africa"), ("Namibia", "Africa"), ("Cameroon", "Africa"), ("Sudan", "Africa"),
                   ("Madagascar", "Africa"), ("Algeria", "Africa"), ("Tunisia", "Africa"), ("Somalia", "Africa"),
                   ("Bolivia", "South America"), ("Ecuador", "South America"), ("Paraguay", "South America"),
                   ("Uruguay", "South America"), ("Guyana", "South America"), ("Guatemala", "North America"),
                   ("Honduras", "North America"), ("Panama", "North America"), ("Costa Rica", "North America"),
                   ("Jamaica", "North America"), ("Haiti", "North America"), ("Nicaragua", "North America"),
                   ("Papua New Guinea", "Oceania"), ("Tonga", "Oceania"), ("Vanuatu", "Oceania")]
CAPITALS_MORE = [("Morocco", "Rabat"), ("Ghana", "Accra"), ("Ethiopia", "Addis Ababa"), ("Senegal", "Dakar"),
                 ("Uganda", "Kampala"), ("Zimbabwe", "Harare"), ("Colombia", "Bogota"), ("Venezuela", "Caracas"),
                 ("Ecuador", "Quito"), ("Uruguay", "Montevideo"), ("Romania", "Bucharest"), ("Bulgaria", "Sofia"),
                 ("Serbia", "Belgrade"), ("Croatia", "Zagreb"), ("Slovakia", "Bratislava"), ("Slovenia", "Ljubljana"),
                 ("Lithuania", "Vilnius"), ("Latvia", "Riga"), ("Estonia", "Tallinn"), ("Ukraine", "Kyiv"),
                 ("Belarus", "Minsk"), ("Iceland", "Reykjavik"), ("Syria", "Damascus"), ("Lebanon", "Beirut"),
                 ("Jordan", "Amman"), ("Saudi Arabia", "Riyadh"), ("Afghanistan", "Kabul"),
                 ("Pakistan", "Islamabad"), ("Bangladesh", "Dhaka"), ("Nepal", "Kathmandu"),
                 ("Mongolia", "Ulaanbaatar"), ("Malaysia", "Kuala Lumpur"), ("Cambodia", "Phnom Penh"),
                 ("New Zealand", "Wellington"), ("Jamaica", "Kingston"), ("Tunisia", "Tunis"), ("Algeria", "Algiers"),
                 ("Libya", "Tripoli"), ("Sudan", "Khartoum"), ("Nigeria", "Abuja"), ("Zambia", "Lusaka"),
                 ("Angola", "Luanda"), ("Qatar", "Doha"), ("Scotland", "Edinburgh"), ("Wales", "Cardiff")]
DISHES = [("sushi", "Japan"), ("miso soup", "Japan"), ("sake", "Japan"), ("paella", "Spain"),
          ("gazpacho", "Spain"), ("tapas", "Spain"), ("churros", "Spain"), ("croissants", "France"),
          ("crepes", "France"), ("ratatouille", "France"), ("bouillabaisse", "France"), ("fondue", "Switzerland"),
          ("kimchi", "Korea"), ("bulgogi", "Korea"), ("tacos", "Mexico"), ("guacamole", "Mexico"),
          ("tequila", "Mexico"), ("goulash", "Hungary"), ("haggis", "Scotland"), ("moussaka", "Greece"),
          ("feta cheese", "Greece"), ("tzatziki", "Greece"), ("sauerkraut", "Germany"), ("bratwurst", "Germany"),
          ("pretzels", "Germany"), ("pad thai", "Thailand"), ("pho", "Vietnam"), ("dim sum", "China"),
          ("Peking duck", "China"), ("chow mein", "China"), ("pierogi", "Poland"), ("risotto", "Italy"),
          ("lasagne", "Italy"), ("gelato", "Italy"), ("pesto", "Italy"), ("naan bread", "India"),
          ("fish and chips", "England"), ("Yorkshire pudding", "England"), ("poutine", "Canada"),
          ("ceviche", "Peru"), ("feijoada", "Brazil"), ("tagine", "Morocco"), ("Gouda cheese", "the Netherlands"),
          ("stroopwafels", "the Netherlands"), ("Wiener schnitzel", "Austria"), ("pastel de nata", "Portugal"),
          ("nasi goreng", "Indonesia")]
SPORTS = [("a shuttlecock", "badminton"), ("a puck", "ice hockey"), ("a wicket", "cricket"), ("a bail", "cricket"),
          ("a putter", "golf"), ("a bunker and a fairway", "golf"), ("a cue", "snooker"), ("a coxswain", "rowing"),
          ("a javelin", "athletics"), ("a relay baton", "athletics"), ("a pommel horse", "gymnastics"),
          ("a balance beam", "gymnastics"), ("a foil and a mask", "fencing"), ("a sabre", "fencing"),
          ("a bow and a quiver", "archery"), ("a dartboard", "darts"), ("a backboard", "basketball"),
          ("a slam dunk", "basketball"), ("a broom and a stone on ice", "curling"), ("a stirrup", "horse riding"),
          ("a punchbag", "boxing"), ("a knockout", "boxing"), ("a corner kick", "football"),
          ("a header into the goal", "football"), ("a scrum", "rugby"), ("a try", "rugby"),
          ("a pitcher and a home run", "baseball"), ("a peloton", "cycling"), ("a velodrome", "cycling"),
          ("a chequered flag", "motor racing"), ("a pit stop", "motor racing"), ("a lane rope", "swimming"),
          ("a butterfly stroke", "swimming"), ("a ping-pong ball", "table tennis"), ("a springboard above a pool", "diving"),
          ("a black belt and a throw", "judo"), ("a grand slam at Wimbledon", "tennis"), ("a spike and a block", "volleyball")]
FEMALES = [("fox", "vixen"), ("sheep", "ewe"), ("pig", "sow"), ("horse", "mare"), ("deer", "doe"),
           ("rabbit", "doe"), ("swan", "pen"), ("chicken", "hen"), ("peafowl", "peahen"), ("tiger", "tigress"),
           ("donkey", "jenny"), ("goat", "nanny"), ("cat", "queen"), ("elephant", "cow"), ("whale", "cow"),
           ("emperor", "empress"), ("god", "goddess"), ("hero", "heroine"), ("wizard", "witch"), ("monk", "nun"),
           ("lord", "lady"), ("count", "countess"), ("baron", "baroness"), ("landlord", "landlady"),
           ("headmaster", "headmistress"), ("steward", "stewardess"), ("tsar", "tsarina"), ("abbot", "abbess"),
           ("masseur", "masseuse"), ("grandson", "granddaughter"), ("stepfather", "stepmother"),
           ("bee that lays eggs", "queen")]
MALES = [("duck", "drake"), ("goose", "gander"), ("sheep", "ram"), ("pig", "boar"), ("horse", "stallion"),
         ("chicken", "rooster"), ("swan", "cob"), ("cat", "tom"), ("bee", "drone"), ("donkey", "jack"),
         ("deer", "stag"), ("rabbit", "buck"), ("goat", "billy"), ("elephant", "bull"), ("whale", "bull"),
         ("turkey", "tom"), ("peafowl", "peacock"), ("seal", "bull"), ("giraffe", "bull"), ("ferret", "hob"),
         ("moose", "bull"), ("hare", "buck")]
SYMBOLS = [("gold", "Au"), ("silver", "Ag"), ("iron", "Fe"), ("oxygen", "O"), ("hydrogen", "H"), ("carbon", "C"),
           ("nitrogen", "N"), ("sodium", "Na"), ("potassium", "K"), ("copper", "Cu"), ("lead", "Pb"), ("tin", "Sn"),
           ("mercury", "Hg"), ("helium", "He"), ("calcium", "Ca"), ("chlorine", "Cl"), ("sulfur", "S"),
           ("zinc", "Zn"), ("neon", "Ne"), ("magnesium", "Mg"), ("aluminium", "Al"), ("silicon", "Si"),
           ("phosphorus", "P"), ("uranium", "U"), ("nickel", "Ni"), ("platinum", "Pt"), ("iodine", "I"),
           ("fluorine", "F"), ("argon", "Ar"), ("lithium", "Li"), ("cobalt", "Co"), ("chromium", "Cr"),
           ("manganese", "Mn"), ("tungsten", "W"), ("titanium", "Ti"), ("radium", "Ra")]
PLANETS = [("Which planet is known as the Red Planet?", "Mars"), ("Which is the largest planet?", "Jupiter"),
           ("Which planet has the best-known rings?", "Saturn"), ("Which planet is closest to the Sun?", "Mercury"),
           ("Which is the hottest planet?", "Venus"), ("Which planet do we live on?", "Earth"),
           ("Which planet spins on its side?", "Uranus"), ("Which planet is farthest from the Sun?", "Neptune"),
           ("Which planet is named after the Roman god of war?", "Mars"),
           ("Which planet is named after the king of the Roman gods?", "Jupiter"),
           ("Which planet is named after the Roman goddess of love?", "Venus"),
           ("Which planet is named after the messenger of the Roman gods?", "Mercury"),
           ("Which planet is named after the Roman god of the sea?", "Neptune"),
           ("Which planet is called the morning star?", "Venus"),
           ("On which planet is the Great Red Spot?", "Jupiter"), ("Which planet has the moon Titan?", "Saturn"),
           ("Which planet has the moon Io?", "Jupiter"), ("Which planet has the moon Triton?", "Neptune"),
           ("Which planet lies between Earth and Jupiter?", "Mars"),
           ("Which planet lies between Venus and Mars?", "Earth"),
           ("Which planet lies between Saturn and Neptune?", "Uranus"),
           ("Which planet lies between Mercury and Earth?", "Venus"),
           ("Which planet lies between Mars and Saturn?", "Jupiter"),
           ("Which planet lies between Jupiter and Uranus?", "Saturn"),
           ("Which planet have the rovers Curiosity and Perseverance explored?", "Mars"),
           ("Which is the smallest planet?", "Mercury"), ("On which planet is life known to exist?", "Earth")]
SPACE = [("What do you call a person who travels into space?", "astronaut"),
         ("What is the name of the galaxy we live in?", "the Milky Way"),
         ("What do you call a group of stars that forms a pattern in the sky?", "constellation"),
         ("What is a ball of ice and dust with a glowing tail called?", "comet"),
         ("What is the path of a planet around the Sun called?", "orbit"),
         ("What happens when the Moon blocks the light of the Sun?", "eclipse"),
         ("What is a shooting star?", "meteor"), ("What is the hole on the Moon left by a falling rock called?", "crater"),
         ("What instrument makes faraway stars look closer?", "telescope"),
         ("What is the name of the Earth's natural satellite?", "the Moon"),
         ("What is the star at the centre of our solar system?", "the Sun"),
         ("What is a rocky body that orbits the Sun between Mars and Jupiter called?", "asteroid"),
         ("What vehicle launches astronauts into space?", "rocket"),
         ("What is a huge group of billions of stars held together called?", "galaxy"),
         ("What is a place where gravity is so strong that not even light can escape?", "black hole"),
         ("What force keeps our feet on the ground?", "gravity"),
         ("What is a cloud of gas and dust where stars are born called?", "nebula"),
         ("What building is made for watching the stars?", "observatory"),
         ("What is the explosion of a dying star called?", "supernova"),
         ("What are the coloured lights in the sky near the poles called?", "aurora"),
         ("What is the star that points to the north called?", "the North Star"),
         ("What is a large base in orbit where astronauts live and work?", "space station"),
         ("What do you call a machine sent to study another planet without a crew?", "probe"),
         ("What do we call the Sun and everything that orbits it?", "the solar system")]
SHAPES = [("a ball", "sphere"), ("the Earth", "sphere"), ("a marble", "sphere"), ("a dice", "cube"),
          ("a block of ice in a drink", "cube"), ("a can of beans", "cylinder"), ("a pipe", "cylinder"),
          ("a candle", "cylinder"), ("a party hat", "cone"), ("a funnel", "cone"), ("an egg", "oval"),
          ("a coin", "circle"), ("a wheel", "circle"), ("a pizza", "circle"), ("a slice of pizza", "triangle"),
          ("a sail on a small boat", "triangle"), ("a chessboard", "square"), ("a door", "rectangle"),
          ("a sheet of paper", "rectangle"), ("the Moon a few days after the new moon", "crescent"),
          ("a starfish", "star"), ("the symbol on a valentine card", "heart"), ("a rainbow", "arc"), ("a baseball field", "diamond"),
          ("a running track", "oval"), ("a tent", "triangle"), ("a pyramid in Egypt", "pyramid")]
WORKPLACES = [("a nurse", "hospital"), ("a surgeon", "hospital"), ("a teacher", "school"), ("a librarian", "library"),
              ("a bank clerk", "bank"), ("a miner", "mine"), ("a chemist who does experiments", "laboratory"),
              ("a priest", "church"), ("a pharmacist", "pharmacy"), ("a baker", "bakery"), ("a mechanic", "garage"),
              ("a zookeeper", "zoo"), ("a curator", "museum"), ("a chef", "restaurant"), ("a waiter", "restaurant"),
              ("a stage actor", "theatre"), ("an air traffic controller", "airport"), ("a firefighter", "fire station"),
              ("a postal clerk", "post office"), ("an astronomer", "observatory"), ("a clown", "circus"),
              ("an acrobat", "circus"), ("a hairdresser", "salon"), ("a judge", "court"), ("a jockey", "racecourse"),
              ("a blacksmith", "forge"), ("a miller", "mill"), ("a brewer", "brewery"), ("a winemaker", "vineyard"),
              ("an ambassador", "embassy"), ("a prison guard", "prison"), ("a undertaker", "funeral home"),
              ("a member of parliament", "parliament"), ("a projectionist", "cinema"), ("a farmer", "farm"),
              ("a docker", "port"), ("a croupier", "casino"), ("a bartender", "bar"), ("a barista", "cafe"),
              ("a cashier", "supermarket"), ("a lifeguard", "swimming pool"), ("a monk", "monastery")]
YOUNG_MORE = [("hare", "leveret"), ("pigeon", "squab"), ("eel", "elver"), ("hedgehog", "hoglet"),
              ("turkey", "poult"), ("llama", "cria"), ("alpaca", "cria"), ("zebra", "foal"), ("donkey", "foal"),
              ("giraffe", "calf"), ("hippopotamus", "calf"), ("rhinoceros", "calf"), ("camel", "calf"),
              ("dolphin", "calf"), ("otter", "pup"), ("shark", "pup"), ("bat", "pup"), ("badger", "cub"),
              ("tiger", "cub"), ("leopard", "cub"), ("panda", "cub"), ("koala", "joey"), ("wallaby", "joey"),
              ("beaver", "kit"), ("ferret", "kit"), ("ostrich", "chick"), ("penguin", "chick"),
              ("spider", "spiderling"), ("toad", "tadpole"), ("fly", "maggot"), ("moth", "caterpillar"),
              ("dragonfly", "nymph"), ("cod", "fry"), ("hawk", "eyas"), ("platypus", "puggle"),
              ("oyster", "spat"), ("chimpanzee", "infant"), ("mosquito", "wriggler")]
MADE_FROM = [("crisps", "potatoes"), ("a milkshake", "milk"), ("yoghurt", "milk"), ("an omelette", "eggs"),
             ("popcorn", "corn"), ("chocolate", "cocoa"), ("tofu", "soybeans"), ("soy sauce", "soybeans"),
             ("ketchup", "tomatoes"), ("salsa", "tomatoes"), ("cider", "apples"), ("guacamole", "avocados"),
             ("hummus", "chickpeas"), ("falafel", "chickpeas"), ("pickles", "cucumbers"), ("raisins", "grapes"),
             ("sultanas", "grapes"), ("marmalade", "oranges"), ("sauerkraut", "cabbage"), ("coleslaw", "cabbage"),
             ("beer", "barley"), ("honey", "nectar"), ("glass", "sand"), ("steel", "iron"), ("charcoal", "wood"),
             ("linen", "flax"), ("plastic", "oil"), ("pasta", "wheat"), ("sake", "rice"), ("porridge", "oats"),
             ("tequila", "agave"), ("rum", "sugar cane"), ("maple syrup", "sap"), ("pesto", "basil"),
             ("prunes", "plums"), ("ghee", "butter"), ("baba ganoush", "aubergines"), ("a wine cork", "bark")]
ANIMALS = [("has a trunk", "elephant"), ("has black and white stripes", "zebra"), ("has the longest neck", "giraffe"),
           ("carries its baby in a pouch", "kangaroo"), ("has a hump", "camel"), ("spins a web", "spider"),
           ("carries its shell on its back", "snail"), ("eats bamboo", "panda"), ("laughs", "hyena"),
           ("has a horn on its nose", "rhinoceros"), ("makes honey", "bee"), ("builds dams", "beaver"),
           ("is the fastest on land", "cheetah"), ("is the largest bird", "ostrich"),
           ("changes colour to hide", "chameleon"), ("has long sharp quills", "porcupine"),
           ("curls into a prickly ball", "hedgehog"), ("is called the king of the jungle", "lion"),
           ("hangs upside down to sleep", "bat"), ("moves very slowly and hangs from trees", "sloth"),
           ("eats ants with a long sticky tongue", "anteater"), ("waddles on the ice and cannot fly", "penguin"),
           ("stands on one leg and has pink feathers", "flamingo"), ("can copy human speech", "parrot"),
           ("hoots at night", "owl"), ("glows in the dark in summer", "firefly"),
           ("lays eggs but feeds its young on milk and has a bill", "platypus"), ("squirts ink", "octopus"),
           ("walks sideways", "crab"), ("is the largest cat", "tiger"), ("pulls Santa's sleigh", "reindeer"),
           ("gives us wool", "sheep"), ("purrs", "cat"), ("has a fin on its back and frightens swimmers", "shark"),
           ("swings through the trees by its arms", "monkey"), ("can fly backwards", "hummingbird"),
           ("has no legs and slithers", "snake"), ("stores nuts for the winter", "squirrel"),
           ("lives on a lily pad and croaks", "frog"), ("is the largest animal that has ever lived", "whale")]
PEOPLE = [("Mozart", "Austria"), ("Beethoven", "Germany"), ("Bach", "Germany"), ("Chopin", "Poland"),
          ("Tchaikovsky", "Russia"), ("Vivaldi", "Italy"), ("Verdi", "Italy"), ("Shakespeare", "England"),
          ("Charles Dickens", "England"), ("Tolstoy", "Russia"), ("Dostoevsky", "Russia"), ("Cervantes", "Spain"),
          ("Dante", "Italy"), ("Goethe", "Germany"), ("Victor Hugo", "France"), ("Picasso", "Spain"),
          ("Van Gogh", "the Netherlands"), ("Rembrandt", "the Netherlands"), ("Monet", "France"),
          ("Leonardo da Vinci", "Italy"), ("Michelangelo", "Italy"), ("Frida Kahlo", "Mexico"),
          ("Mahatma Gandhi", "India"), ("Confucius", "China"), ("Nelson Mandela", "South Africa"),
          ("Isaac Newton", "England"), ("Charles Darwin", "England"), ("Galileo", "Italy"),
          ("Copernicus", "Poland"), ("Sibelius", "Finland"), ("Grieg", "Norway"), ("Ibsen", "Norway"),
          ("Hans Christian Andersen", "Denmark"), ("Astrid Lindgren", "Sweden"), ("Robert Burns", "Scotland"),
          ("James Joyce", "Ireland"), ("Plato", "Greece"), ("Aristotle", "Greece"),
          ("Cleopatra", "Egypt"), ("Genghis Khan", "Mongolia"), ("Pele", "Brazil"),
          ("Gabriel Garcia Marquez", "Colombia"), ("Pablo Neruda", "Chile"), ("Jorge Luis Borges", "Argentina"),
          ("Abraham Lincoln", "the United States"), ("Mark Twain", "the United States")]
LANDMARKS = [("the Eiffel Tower", "France"), ("the Colosseum", "Italy"), ("Big Ben", "England"),
             ("the Great Wall", "China"), ("the Taj Mahal", "India"), ("the Statue of Liberty", "the United States"),
             ("the pyramids of Giza", "Egypt"), ("Machu Picchu", "Peru"), ("the Kremlin", "Russia"),
             ("the Acropolis", "Greece"), ("the Leaning Tower of Pisa", "Italy"), ("the Sagrada Familia", "Spain"),
             ("the Alhambra", "Spain"), ("the Brandenburg Gate", "Germany"), ("Mount Fuji", "Japan"),
             ("Petra", "Jordan"), ("Angkor Wat", "Cambodia"), ("Stonehenge", "England"),
             ("the statue of Christ the Redeemer", "Brazil"), ("the Golden Gate Bridge", "the United States"),
             ("Table Mountain", "South Africa"), ("Mount Kilimanjaro", "Tanzania"), ("Uluru", "Australia"),
             ("Chichen Itza", "Mexico"), ("the Hagia Sophia", "Turkey"), ("the Louvre", "France"),
             ("the Forbidden City", "China"), ("Buckingham Palace", "England"), ("Loch Ness", "Scotland"),
             ("the Little Mermaid statue", "Denmark"), ("the Atomium", "Belgium"), ("Ben Nevis", "Scotland"),
             ("Mount Vesuvius", "Italy"), ("the river Thames", "England"), ("the river Seine", "France"),
             ("the river Tiber", "Italy"), ("the river Ganges", "India"), ("the Yangtze river", "China"),
             ("the Mississippi river", "the United States"), ("the river Volga", "Russia"),
             ("the river Shannon", "Ireland"), ("the Great Barrier Reef", "Australia"), ("Ha Long Bay", "Vietnam"),
             ("the Blue Mosque", "Turkey"), ("Mount Rushmore", "the United States"), ("the CN Tower", "Canada"),
             ("Neuschwanstein Castle", "Germany"), ("the Parthenon", "Greece"), ("the Palace of Versailles", "France"),
             ("Red Square", "Russia"), ("the Petronas Towers", "Malaysia"), ("Borobudur", "Indonesia"),
             ("the Galapagos Islands", "Ecuador")]

# Answers of one family that can both be right for one of its questions (near-synonyms, a kind and its
# member): never drawn against each other. Singular/plural and case variants are refused for every
# family (`also_right`).
CLASHES: dict[str, list[set[str]]] = {
    "body": [{"legs", "foot"}, {"lungs", "nose"}, {"hand", "finger"}],
    "home": [{"den", "cave"}, {"den", "burrow"}, {"nest", "eyrie"}, {"barn", "stable"}, {"barn", "sty"},
             {"barn", "coop"}, {"monastery", "convent"}],
    "material": [{"metal", "steel"}, {"metal", "gold"}, {"steel", "gold"}, {"metal", "stone"}, {"milk", "cream"},
                 {"snow", "ice"}, {"cardboard", "paper"}, {"grapes", "fruit"}, {"wool", "cotton"},
                 {"fibre", "cotton"}, {"fibre", "wool"}, {"fibre", "silk"}, {"leather", "rubber"}],
    "young": [{"pup", "puppy"}, {"kit", "kitten"}, {"kit", "cub"}, {"chick", "owlet"}, {"chick", "eaglet"},
              {"chick", "duckling"}, {"chick", "gosling"}, {"chick", "cygnet"}],
    "sound": [{"baa", "bleat"}, {"bark", "growl"}, {"bark", "howl"}, {"growl", "howl"}, {"growl", "roar"},
              {"honk", "hiss"}, {"meow", "hiss"}, {"meow", "growl"}],
    "synonym": [{"weep", "yell"}, {"finish", "close"}],
    "group": [{"herd", "flock"}, {"pack", "deck"}, {"bunch", "bouquet"}, {"brood", "clutch"}, {"crowd", "mob"},
              {"gang", "mob"}, {"school", "pod"}, {"colony", "swarm"}, {"school", "class"}, {"flock", "gaggle"},
              {"flock", "murder"}, {"flock", "parliament"}, {"crew", "team"}, {"crew", "gang"}, {"pod", "herd"},
              {"mob", "troop"}, {"mob", "herd"}],
    "language2": [{"Malay", "Indonesian"}, {"Croatian", "Serbian"}, {"Czech", "Slovak"}, {"Swahili", "English"},
                  {"Urdu", "English"}, {"Somali", "Arabic"}, {"Arabic", "French"}],
    "dish": [{"Austria", "Germany"}, {"Scotland", "England"}, {"France", "Austria"}, {"Brazil", "Portugal"}],
    "female": [{"lady", "countess"}, {"lady", "baroness"}, {"hen", "peahen"}, {"nanny", "doe"}, {"nun", "abbess"}],
    "male": [{"buck", "stag"}, {"billy", "buck"}, {"buck", "jack"}],
    "shape": [{"circle", "sphere"}, {"square", "rectangle"}, {"cone", "triangle"}, {"oval", "circle"},
              {"oval", "sphere"}, {"crescent", "arc"}, {"pyramid", "triangle"}, {"diamond", "square"}],
    "workplace": [{"restaurant", "cafe"}, {"bar", "cafe"}, {"bar", "restaurant"}, {"church", "monastery"},
                  {"farm", "vineyard"}, {"laboratory", "observatory"}, {"supermarket", "bank"},
                  {"pharmacy", "hospital"}, {"library", "school"}],
    "young2": [{"cub", "pup"}, {"kit", "cub"}, {"kit", "pup"}, {"chick", "squab"}, {"chick", "poult"},
               {"chick", "eyas"}, {"maggot", "caterpillar"}, {"maggot", "wriggler"}, {"caterpillar", "wriggler"},
               {"nymph", "wriggler"}, {"calf", "infant"}, {"cub", "infant"}, {"pup", "infant"}, {"fry", "elver"}, {"hoglet", "pup"}],
    "madefrom": [{"potatoes", "corn"}, {"barley", "wheat"}, {"oats", "wheat"}, {"soybeans", "wheat"},
                 {"butter", "milk"}, {"wood", "bark"}, {"wood", "sap"}],
    "animal": [{"snail", "crab"}, {"porcupine", "hedgehog"}, {"bat", "sloth"}, {"monkey", "sloth"},
               {"whale", "shark"}, {"chameleon", "octopus"}, {"cat", "cheetah"}, {"anteater", "chameleon"}],
    "people": [{"Egypt", "Greece"}, {"Austria", "Germany"}, {"Poland", "Germany"}],
}


def _forms(word: str) -> set[str]:
    """The word lower-cased, with its regular plurals and its irregular plural (PLURALS)."""
    w = word.lower()
    forms = {w, w + "s", w + "es"}
    if w.endswith("y"):
        forms.add(w[:-1] + "ies")
    if w.endswith("f"):
        forms.add(w[:-1] + "ves")
    if w.endswith("fe"):
        forms.add(w[:-2] + "ves")
    return forms | {p.lower() for s, p in PLURALS if s == w}


def variant(a: str, b: str) -> bool:
    """Whether b is a, or a case or singular/plural variant of it ("eye" / "Eyes", "foot" / "feet")."""
    return b.lower() in _forms(a) or a.lower() in _forms(b)


def also_right(family: str, answer: str, other: str) -> bool:
    """Whether `other` may also be right where `answer` is: a variant of it, or a clash of its family (CLASHES)."""
    return variant(answer, other) or any({answer, other} <= group for group in CLASHES.get(family, ()))


def _pairs(family: str, template: str, pairs: list, pool: list | None = None) -> list[tuple]:
    answers = sorted({b for _, b in pairs}) if pool is None else pool
    return [(family, template.format(a), b, answers) for a, b in pairs]


def candidates() -> list[tuple[str, str, str, list[str]]]:
    """(family, question, answer, that family's answers) for every candidate item: v1's 240, the pilot's
    seventeen families, then the extension's; new families go at the end (an item's id is its index)."""
    out = list(v1._items())
    out += _pairs("plural", "Question: What is the plural of \"{}\"?\nAnswer:", PLURALS)
    out += _pairs("past", "Question: What is the past tense of \"{}\"?\nAnswer:", PAST)
    out += _pairs("language", "Question: What language is spoken in {}?\nAnswer:", LANGUAGES)
    out += _pairs("continent", "Question: On which continent is {}?\nAnswer:", CONTINENTS)
    out += _pairs("young", "Question: What is a young {} called?\nAnswer: a", YOUNG)
    out += _pairs("sound", "Question: What sound does a {} make?\nAnswer: a", SOUNDS)
    out += _pairs("material", "Question: What is {} usually made of?\nAnswer:", MATERIALS)
    out += _pairs("home", "Question: Where does a {} live?\nAnswer: in a", HOMES)
    out += _pairs("worker", "Question: What do you call a person who {}?\nAnswer: a", WORKERS)
    out += _pairs("city", "Question: In which country is the city of {}?\nAnswer:", CITIES)
    out += _pairs("currency", "Question: What is the currency of {}?\nAnswer: the", CURRENCIES)
    out += _pairs("comparative", "Question: What is the comparative of \"{}\"?\nAnswer:", COMPARATIVES)
    out += _pairs("synonym", "Question: What word means the same as \"{}\"?\nAnswer:", SYNONYMS)
    out += _pairs("body", "Question: What part of the body do you use to {}?\nAnswer: the", BODY)
    out += _pairs("counterpart", "Question: What is the counterpart of \"{}\"?\nAnswer:", OPPOSITE_NOUNS)
    out += _pairs("season", "Question: What is {}?\nAnswer:", SEASONS)
    out += [("before", f"Question: What is {q}?\nAnswer:", a, pool) for q, a, pool in BEFORE]
    # the extension (issue 44, part 5)
    out += _pairs("group", "Question: What is a group of {} called?\nAnswer: a", GROUPS)
    out += _pairs("instrument", "Question: What kind of musical instrument is {}?\nAnswer: a", INSTRUMENTS)
    out += _pairs("language2", "Question: What language is spoken in {}?\nAnswer:", LANGUAGES_MORE)
    out += _pairs("continent2", "Question: On which continent is {}?\nAnswer:", CONTINENTS_MORE)
    out += _pairs("capital2", "Question: What is the capital of {}?\nAnswer:", CAPITALS_MORE)
    out += _pairs("dish", "Question: Which country is the home of {}?\nAnswer:", DISHES)
    out += _pairs("sport", "Question: In which sport would you see {}?\nAnswer:", SPORTS)
    out += _pairs("female", "Question: What is a female {} called?\nAnswer:", FEMALES)
    out += _pairs("male", "Question: What is a male {} called?\nAnswer:", MALES)
    out += _pairs("symbol", "Question: What is the chemical symbol for {}?\nAnswer:", SYMBOLS)
    out += _pairs("planet", "Question: {}\nAnswer:", PLANETS)
    out += _pairs("space", "Question: {}\nAnswer:", SPACE)
    out += _pairs("shape", "Question: What shape is {}?\nAnswer:", SHAPES)
    out += _pairs("workplace", "Question: Where does {} work?\nAnswer: at the", WORKPLACES)
    out += _pairs("young2", "Question: What is a young {} called?\nAnswer:", YOUNG_MORE)
    out += _pairs("madefrom", "Question: What is the main ingredient of {}?\nAnswer:", MADE_FROM)
    out += _pairs("animal", "Question: Which animal {}?\nAnswer: the", ANIMALS)
    out += _pairs("people", "Question: Which country was {} from?\nAnswer:", PEOPLE)
    out += _pairs("landmark", "Question: In which country can you see {}?\nAnswer:", LANDMARKS)
    return out


def build(families: tuple[str, ...] | None = None) -> list[dict]:
    """The items (all candidates, or those of `families`), each with its seeded distractors;
    an item keeps the same id, choices and order whichever families are kept.

    The distractors are three of the family's other answers, drawn from one seeded stream as the
    pilot drew them; a drawn distractor that may also be right (`also_right`: a case or
    singular/plural variant of the answer, or a clash in CLASHES) is replaced by one drawn from a
    generator seeded by the item's id, among the answers that may not. The stream is the same
    either way, so an item without such a draw keeps the pilot's choices and order byte for byte."""
    rng = random.Random(0)
    rows = []
    for i, (family, question, answer, pool) in enumerate(candidates()):
        item_id = f"{family}-{i:03d}"
        distractors = rng.sample(sorted(set(pool) - {answer}), 3)
        wrong = sorted(x for x in set(pool) if x != answer and not also_right(family, answer, x))
        if len(wrong) < 3:
            raise ValueError(f"{item_id}: fewer than three answers of {family} are surely wrong for {answer!r}")
        if any(d not in wrong for d in distractors):
            redraw = random.Random(item_id)
            for j, d in enumerate(distractors):
                if d not in wrong:
                    distractors[j] = redraw.choice([x for x in wrong if x not in distractors])
        choices = [answer, *distractors]
        rng.shuffle(choices)
        if families is None or family in families:
            rows.append({"id": item_id, "question": question, "choices": choices, "answer": choices.index(answer)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every candidate family")
    args = parser.parse_args()
    if not args.all and not KEPT:
        parser.error("KEPT is empty: run the pilot first (studies/pilot_v3.py), or give --all")
    name = "facts-mc-v3-candidates.jsonl" if args.all else "facts-mc-v3.jsonl"
    rows = build(None if args.all else KEPT)
    path = HERE / "data" / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{path}: {len(rows)} items")


if __name__ == "__main__":
    main()
