"""SSB data byte-identical to ssb-dbgen's `dbgen -s SF` (github.com/eyalroz/ssb-dbgen), made in chunks.

dbgen's random streams are fixed, so there is no seed: every (SF) has one data set. A whole SF >= 1 gives
dbgen's five files exactly. Below SF 1 dbgen shrinks every table, the date table too, which leaves most
order dates without a date row; here every table but `date` is dbgen's at that SF and `date` keeps the
whole calendar. Whole-SF quirks kept on purpose: part has 200,000 x floor(1 + log2 SF) rows but lineorder
only refers to the first 200,000 x floor(1 + ln SF); custkeys divisible by 3 are moved to a neighbour.
"""
