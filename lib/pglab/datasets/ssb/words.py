"""Fixed word lists of the TPC-H specification that SSB's value rules draw from."""

# TPC-H nations in key order, each with the index of its region in REGIONS.
REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = (
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
)
NATION_NAMES = tuple(name for name, _ in NATIONS)
NATION_REGION = tuple(region for _, region in NATIONS)
CITY_DIGITS = 10


def city_name(nation: str, digit: int) -> str:
    """SSB city: nation cut or space-padded to 9 characters, then one digit (`UNITED KI1`)."""
    return f"{nation[:9]:<9}{digit}"


# Cities in the order nation index * 10 + digit, so a city code gathers its name directly.
CITIES = tuple(city_name(nation, digit) for nation in NATION_NAMES for digit in range(CITY_DIGITS))

MARKET_SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
ORDER_PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "TRUCK", "MAIL", "FOB", "SHIP")

# TPC-H P_NAME colour words (92).
COLORS = (
    "almond",
    "antique",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanched",
    "blue",
    "blush",
    "brown",
    "burlywood",
    "burnished",
    "chartreuse",
    "chiffon",
    "chocolate",
    "coral",
    "cornflower",
    "cornsilk",
    "cream",
    "cyan",
    "dark",
    "deep",
    "dim",
    "dodger",
    "drab",
    "firebrick",
    "floral",
    "forest",
    "frosted",
    "gainsboro",
    "ghost",
    "goldenrod",
    "green",
    "grey",
    "honeydew",
    "hot",
    "indian",
    "ivory",
    "khaki",
    "lace",
    "lavender",
    "lawn",
    "lemon",
    "light",
    "lime",
    "linen",
    "magenta",
    "maroon",
    "medium",
    "metallic",
    "midnight",
    "mint",
    "misty",
    "moccasin",
    "navajo",
    "navy",
    "olive",
    "orange",
    "orchid",
    "pale",
    "papaya",
    "peach",
    "peru",
    "pink",
    "plum",
    "powder",
    "puff",
    "purple",
    "red",
    "rose",
    "rosy",
    "royal",
    "saddle",
    "salmon",
    "sandy",
    "seashell",
    "sienna",
    "sky",
    "slate",
    "smoke",
    "snow",
    "spring",
    "steel",
    "tan",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "yellow",
)

# TPC-H P_TYPE syllables (6 x 5 x 5 = 150 types).
TYPE_SYLLABLE_1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_SYLLABLE_2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_SYLLABLE_3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
PART_TYPES = tuple(f"{a} {b} {c}" for a in TYPE_SYLLABLE_1 for b in TYPE_SYLLABLE_2 for c in TYPE_SYLLABLE_3)

# TPC-H P_CONTAINER syllables (5 x 8 = 40 containers).
CONTAINER_SYLLABLE_1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_SYLLABLE_2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
CONTAINERS = tuple(f"{a} {b}" for a in CONTAINER_SYLLABLE_1 for b in CONTAINER_SYLLABLE_2)

# Part hierarchy: manufacturer m 1-5, category MFGR#mc (c 1-5), brand MFGR#mcb (b 1-40, unpadded as the
# public generator prints it). Index orders: m-1; (m-1)*5 + c-1; ((m-1)*5 + c-1)*40 + b-1.
MFGR_COUNT, CATEGORIES_PER_MFGR, BRANDS_PER_CATEGORY = 5, 5, 40
MFGRS = tuple(f"MFGR#{m}" for m in range(1, MFGR_COUNT + 1))
CATEGORIES = tuple(f"{mfgr}{c}" for mfgr in MFGRS for c in range(1, CATEGORIES_PER_MFGR + 1))
BRANDS = tuple(f"{cat}{b}" for cat in CATEGORIES for b in range(1, BRANDS_PER_CATEGORY + 1))

# TPC-H random address alphabet (dbgen's a-string symbols).
ADDRESS_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,"
