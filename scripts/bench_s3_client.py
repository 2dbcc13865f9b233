"""boto3 against obstore on a real SeaweedFS, in one run: which S3 client memfs uses.

For each client, the four calls S3Backend makes: the conditional PUT
(``If-None-Match: *``), GET, HEAD and a LIST of one prefix, sequentially from one thread
and then from 8 threads at once. Printed per call: requests/s and the client's CPU per
call (this process's user+system time: the server's CPU is the same for both). Absolute
numbers depend on the machine and its load; the ratios between the two clients, measured
side by side here, are what the choice rests on.

    .venv/bin/python scripts/bench_s3_client.py [--calls 400] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import boto3  # noqa: E402
import botocore.config  # noqa: E402
import botocore.exceptions  # noqa: E402

from engine_seaweedfs import ACCESS_KEY, REGION, SECRET_KEY, SeaweedFS  # noqa: E402

Op = Callable[[int], None]


def boto3_ops(endpoint: str, bucket: str, threads: int) -> dict[str, Op]:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        config=botocore.config.Config(
            s3={"addressing_style": "path"}, max_pool_connections=threads * 2
        ),
    )
    run = uuid.uuid4().hex[:6]

    def put(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"b{run}/k{i}", Body=b"x" * 512, IfNoneMatch="*")
        try:  # the second PUT of a key must be refused: part of the measured cost
            client.put_object(Bucket=bucket, Key=f"b{run}/k{i}", Body=b"y", IfNoneMatch="*")
            raise SystemExit("boto3: a conditional PUT overwrote an existing key")
        except botocore.exceptions.ClientError as exc:
            assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 412

    def get(i: int) -> None:
        assert client.get_object(Bucket=bucket, Key=f"b{run}/k{i}")["Body"].read() == b"x" * 512

    def head(i: int) -> None:
        client.head_object(Bucket=bucket, Key=f"b{run}/k{i}")

    def listing(i: int) -> None:
        page = client.list_objects_v2(Bucket=bucket, Prefix=f"b{run}/k{i % 10}", MaxKeys=1000)
        assert page.get("KeyCount", 0) >= 1

    return {"put_if_absent": put, "get": get, "head": head, "list": listing}


def obstore_ops(endpoint: str, bucket: str, threads: int) -> dict[str, Op]:
    import obstore
    from obstore.exceptions import AlreadyExistsError
    from obstore.store import S3Store

    store = S3Store(
        bucket,
        endpoint=endpoint,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        region=REGION,
        virtual_hosted_style_request=False,
        client_options={"allow_http": True, "pool_max_idle_per_host": str(threads * 2)},
    )
    run = uuid.uuid4().hex[:6]

    def put(i: int) -> None:
        obstore.put(store, f"o{run}/k{i}", b"x" * 512, mode="create")
        try:
            obstore.put(store, f"o{run}/k{i}", b"y", mode="create")
            raise SystemExit("obstore: a conditional PUT overwrote an existing key")
        except AlreadyExistsError:
            pass

    def get(i: int) -> None:
        assert bytes(obstore.get(store, f"o{run}/k{i}").bytes()) == b"x" * 512

    def head(i: int) -> None:
        obstore.head(store, f"o{run}/k{i}")

    def listing(i: int) -> None:
        # obstore lists whole folders only (a prefix is a path): the closest call.
        assert any(obstore.list(store, f"o{run}"))

    return {"put_if_absent": put, "get": get, "head": head, "list": listing}


def _shifted(op: Op, offset: int) -> Op:
    return lambda i: op(i + offset)


def measure(op: Op, calls: int, threads: int) -> tuple[float, float]:
    """(requests/s, client CPU ms per call) of ``calls`` calls on ``threads`` threads."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if threads == 1:
        for i in range(calls):
            op(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(op, range(calls)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return calls / wall, cpu / calls * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400, help="calls per client and kind (default 400)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent callers (default 8)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; {args.calls} calls per measurement")
    with SeaweedFS() as engine:
        bucket = engine.bucket()
        results: dict[tuple[str, str, int], tuple[float, float]] = {}
        clients = {
            "boto3": boto3_ops(engine.endpoint, bucket, args.threads),
            "obstore": obstore_ops(engine.endpoint, bucket, args.threads),
        }
        for threads in (1, args.threads):
            for name in ("put_if_absent", "get", "head", "list"):
                # Alternate the clients so a load change on the machine hits both.
                for client, ops in clients.items():
                    op = ops[name]
                    if name == "put_if_absent" and threads > 1:
                        # New keys: the sequential pass created 0..calls-1 already.
                        op = _shifted(op, args.calls)
                    results[(client, name, threads)] = measure(op, args.calls, threads)
        print(
            f"{'call':<14}{'threads':>8}{'boto3 req/s':>13}{'obstore req/s':>15}"
            f"{'ratio':>7}{'boto3 CPU ms':>14}{'obstore CPU ms':>16}{'ratio':>7}"
        )
        for threads in (1, args.threads):
            for name in ("put_if_absent", "get", "head", "list"):
                b_rate, b_cpu = results[("boto3", name, threads)]
                o_rate, o_cpu = results[("obstore", name, threads)]
                print(
                    f"{name:<14}{threads:>8}{b_rate:>13.0f}{o_rate:>15.0f}{o_rate / b_rate:>7.2f}"
                    f"{b_cpu:>14.2f}{o_cpu:>16.2f}{o_cpu / b_cpu:>7.2f}"
                )
        print(
            "ratio = obstore / boto3 (req/s: above 1 obstore is faster; CPU: below 1 it"
            " spends less). put_if_absent counts a created PUT and a refused (412) one."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
