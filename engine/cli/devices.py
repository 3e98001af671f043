"""``fireside devices ls|code|pair|rm|revoke|order``: your other machines.

On the machine that shares (``fireside serve --share`` running), ``code`` opens a one-time pairing
code and shows it; on the other, ``pair NAME`` finds NAME on the local network by mDNS (or takes
``--address HOST:PORT``), asks for the code, and pairs (``engine/devices/pairing.py``). Its models
then answer as ``NAME/MODEL`` everywhere (``fireside chat NAME/MODEL``, the local API's ``model``).
``ls`` shows paired devices both ways and the sharing devices heard on the network (a device this one
uses, heard at a new address with its pinned certificate, is moved there: ``devices/relocate.py``); ``rm NAME``
forgets a device this one uses, ``revoke NAME`` shuts out a device that uses this one, at once;
``order NAME...`` says which device answers a model several serve when it is asked for by bare name.
"""

from __future__ import annotations

import argparse
import sys

import httpx

from ..devices import CLIENT, SERVER, DeviceBook, Identity, default_name, short
from ..errors import DeviceError
from ..settings import Settings
from .fmt import print_json, table

FIND_S = 5.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="pair with your other machines and use their models")
    dsub = p.add_subparsers(dest="devices_command", metavar="ACTION", required=True)
    ls = dsub.add_parser("ls", help="list paired devices and those sharing on the local network")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.add_argument("--listen", type=float, default=2.0, metavar="SECONDS",
                    help="how long to listen for sharing devices (0: do not; default 2)")
    ls.set_defaults(handler=cmd_ls)
    code = dsub.add_parser("code", help="show a one-time pairing code (needs `fireside serve --share` running)")
    code.add_argument("--port", type=int, help="the local server's port (default: the settings' port)")
    code.set_defaults(handler=cmd_code)
    pair = dsub.add_parser("pair", help="pair with a sharing device, using the code it shows")
    pair.add_argument("name", help="the device's name, as `fireside devices ls` shows it")
    pair.add_argument("--code", help="the code the device shows (asked for when left out)")
    pair.add_argument("--address", metavar="HOST:PORT", help="where it shares, instead of finding it by mDNS")
    pair.add_argument("--as", dest="me", metavar="NAME", help="this device's name, as the other sees it")
    pair.set_defaults(handler=cmd_pair)
    rm = dsub.add_parser("rm", help="forget a device whose models this one uses")
    rm.add_argument("name")
    rm.set_defaults(handler=cmd_rm)
    order = dsub.add_parser("order", help="show or set which paired device answers first for a model several serve")
    order.add_argument("names", nargs="*", metavar="NAME", help="the devices, most preferred first (none: show)")
    order.set_defaults(handler=cmd_order)
    revoke = dsub.add_parser("revoke", help="shut out a device that uses this one (takes effect at once)")
    revoke.add_argument("name")
    revoke.set_defaults(handler=cmd_revoke)


def cmd_ls(args: argparse.Namespace) -> int:
    from ..devices import Relocator, browse

    book = DeviceBook(Settings.from_env())
    heard = browse(args.listen) if args.listen > 0 else []
    moved = Relocator(book).update(heard) if heard else []
    paired = book.list()
    if args.json:
        print_json({"paired": [{"name": d.name, "role": d.role, "fingerprint": d.fingerprint,
                                "address": d.address or None} for d in paired],
                    "sharing": [{"name": f.name, "addresses": list(f.addresses), "port": f.port,
                                 "fingerprint": f.fingerprint} for f in heard],
                    "moved": [{"name": d.name, "from": old, "to": d.address} for d, old in moved]})
        return 0
    for device, old in moved:
        print(f"{device.name} moved: found at {device.address} (was {old}) by its certificate; the address is updated")
    if paired:
        rows = [[d.name, "this one uses its models" if d.role == SERVER else "uses this one's models",
                 d.address or "-", short(d.fingerprint)] for d in paired]
        print(table(rows, ["NAME", "PAIRING", "ADDRESS", "FINGERPRINT"]))
    else:
        print("no paired devices")
    if heard:
        print("\nsharing on the local network:")
        print(table([[f.name, ", ".join(f"{a}:{f.port}" for a in f.addresses), short(f.fingerprint)] for f in heard],
                    ["NAME", "ADDRESS", "FINGERPRINT"]))
    elif args.listen > 0:
        print(f"\nno device is sharing on the local network (listened {args.listen:g} s)")
    return 0


def cmd_code(args: argparse.Namespace) -> int:
    from ..apikey import load_api_key

    settings = Settings.from_env()
    key = load_api_key()
    url = f"http://127.0.0.1:{args.port or settings.port}/fireside/pair/code"
    try:
        r = httpx.post(url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=5.0)
    except httpx.HTTPError as exc:
        raise DeviceError(f"no Fireside server answers on {url} ({exc}); start `fireside serve --share` first") from None
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    if r.status_code != 200:
        error = body.get("error") if isinstance(body, dict) else None
        raise DeviceError((error or {}).get("message") if isinstance(error, dict) else f"HTTP {r.status_code}")
    print(f"pairing code: {body['code']}  (valid {body['valid_s'] / 60:g} minutes, {body['tries']} tries; "
          f"type it on the other device: `fireside devices pair NAME`)")
    return 0


def _where(name: str, address: str | None) -> tuple[str, int, str | None]:
    """``(host, port, fingerprint it announces or None)`` of the device to pair with."""
    from ..devices import browse

    if address:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise DeviceError(f"{address!r} is not HOST:PORT")
        return host.strip("[]"), int(port), None
    found = next((f for f in browse(FIND_S, want=name) if f.name == name), None)
    if found is None or not found.addresses:
        raise DeviceError(f"no device named {name!r} is sharing on the local network (listened {FIND_S:g} s); "
                          "start `fireside serve --share` there, or give --address HOST:PORT")
    return found.addresses[0], found.port, found.fingerprint


def cmd_pair(args: argparse.Namespace) -> int:
    from ..devices import pair

    settings = Settings.from_env()
    settings.ensure_dirs()
    me = args.me or default_name()
    host, port, fingerprint = _where(args.name, args.address)
    code = args.code or input(f"pairing code shown on {args.name}: ")
    device = pair(DeviceBook(settings), Identity.load_or_create(settings, me), me, args.name, host, port, code,
                  expected_fingerprint=fingerprint)
    print(f"paired with {device.name} at {device.address} (fingerprint {short(device.fingerprint)}); its models "
          f"answer as {device.name}/MODEL")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    device = DeviceBook(Settings.from_env()).remove(args.name, SERVER)
    print(f"forgot {device.name} ({device.address}); pair again to use its models")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    device = DeviceBook(Settings.from_env()).remove(args.name, CLIENT)
    print(f"revoked {device.name}: its requests are refused from now on", file=sys.stdout)
    return 0


def cmd_order(args: argparse.Namespace) -> int:
    book = DeviceBook(Settings.from_env())
    unknown = [n for n in args.names if n not in {d.name for d in book.list(SERVER)}]
    if unknown:
        raise DeviceError(f"not a paired device this one uses: {', '.join(unknown)} (`fireside devices ls` lists them)")
    order = book.set_order(args.names) if args.names else book.order()
    print("preferred order: " + (", ".join(order) if order else "no paired devices") +
          "\n(a model asked for without a device goes to the first that serves it; this machine's own models come first)")
    return 0
