"""The statistics of the benchmark: medians, per-round ratios, fairness."""
import statistics


def med(xs):
    """The median of the values that are not None; None if there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def jain(rates):
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when all are equal, 1/n when one
    gets everything; 0 for no traffic at all."""
    sq = sum(r * r for r in rates)
    return sum(rates) ** 2 / (len(rates) * sq) if sq else 0.0


def min_over_max(rates):
    return min(rates) / max(rates) if rates and max(rates) > 0 else 0.0


def per_round_ratio(pairs):
    """The median over rounds of a / b, from [(a, b)] (one pair per round); a round where
    either is missing, or b is zero, does not count."""
    return med([a / b for a, b in pairs if a is not None and b])


def per(a, b):
    return a / b if b else None
