"""What each EC2 pool may cost an hour, from min to max instances, at the pinned on-demand
prices (config/ec2_prices.py): one line a pool, which `pulumi preview` prints
(pulumi.log.info) and the offline preview lists under "Info:". Only the instances:
their volumes, data transfer and the rest of the stack are not counted, and what is not known
is said, never guessed."""

from decimal import ROUND_HALF_UP, Decimal

from config.ec2_prices import TABLE, generated_at, on_demand_price, regions
from config.hosts import WorkerPool

CENT = Decimal("0.01")


def pool_price_lines(pools: list[WorkerPool], region: str) -> list[str]:
    return [_line(f"gpu-cluster:pools[{index}] ({pool.name})", pool, region)
            for index, pool in enumerate(pools)]


def _line(key: str, pool: WorkerPool, region: str) -> str:
    types = [pool.instance_type, *pool.instance_types]
    size = (f"{pool.min_size} to {pool.max_size}" if pool.scales else f"{pool.max_size}")
    what = f"{key}: {size} × {', '.join(types)} in {region}"
    if pool.capacity_reservation is not None:
        # An On-Demand Capacity Reservation "is charged at the equivalent On-Demand rate
        # whether you run instances in reserved capacity or not" (EC2 User Guide, AWSEC2/
        # latest/UserGuide/capacity-reservations-pricing-billing.html), a Capacity Block at
        # its own price for the time reserved (ec2-capacity-blocks.html): what the pool's
        # instances cost is the reservation's, which the program does not read.
        kind = "Capacity Block" if pool.capacity_block else "capacity reservation"
        return (f"{what}: billed by the {kind} {pool.capacity_reservation}, not per "
                "instance: no figure here")
    unpriced = [kind for kind in types if on_demand_price(kind, region) is None]
    if unpriced:
        return (f"{what}: no price pinned for {', '.join(unpriced)} in {region} ("
                f"config/{TABLE.name} has AWS's on-demand prices of {generated_at()} for "
                f"{', '.join(regions())} only)")
    # An instance may be any of the types (spot: price-capacity-optimized; on-demand: the
    # next type when the first has no capacity), so the dearest bounds the figure.
    price, dearest = max((on_demand_price(kind, region), kind) for kind in types)
    each = f"{_dollars(price, exact=True)} each" + (
        f" for {dearest}, the dearest type" if len(types) > 1 else "")
    figures = _range(pool, price)
    source = f"AWS's Linux on-demand price of {generated_at()}"
    if pool.capacity == "on-demand":
        return f"{what}, on demand: {figures} an hour ({each}, {source})"
    # The pool sets no maximum spot price (components/aws/gpu_worker_pool.py), and without
    # one "the maximum price defaults to the On-Demand price" (AWS whitepaper "Overview of
    # Amazon EC2 Spot Instances", How Spot Instances Work): the on-demand figure is a ceiling.
    base = pool.on_demand_base_size
    share = ("all of them pay" if pool.capacity == "spot" else
             f"the first {base} instance{'' if base == 1 else 's'} and "
             f"{pool.on_demand_percentage}% of the rest run on demand, the others pay")
    return (f"{what}, {pool.capacity}: at most {figures} an hour at the on-demand price "
            f"({each}, {source}); {share} the spot price, unknown (it moves, and the program "
            "pins none) and capped at the on-demand price")


def _range(pool: WorkerPool, price: Decimal) -> str:
    low, high = _dollars(pool.min_size * price), _dollars(pool.max_size * price)
    return high if low == high else f"{low} to {high}"


def _dollars(amount: Decimal, exact: bool = False) -> str:
    """To the cent, or (`exact`) as pinned, trailing zeros dropped but the cents'."""
    if not exact or amount == amount.quantize(CENT):
        return f"${amount.quantize(CENT, rounding=ROUND_HALF_UP):,}"
    return f"${amount.normalize():,f}"
