"""Stand-in for tqdm: iterates without a progress bar."""


def tqdm(iterable=None, *args, **kwargs):
    return iterable if iterable is not None else []


def trange(*args, **kwargs):
    return range(*args)
