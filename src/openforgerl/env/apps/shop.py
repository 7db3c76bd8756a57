"""Shop: search, product list, cart, checkout. State `shop`: `products`, `cart` [{id, name, qty}],
`orders` [{id, items (one name per unit, sorted), name, address, shipping, total}]."""

from __future__ import annotations

from typing import Any

from openforgerl.env.apps._web import Page, Request, Route, WebApp, esc, page, redirect

__all__ = ["ShopApp"]


class ShopApp(WebApp):
    name, prefix = "shop", "/shop"

    def initial(self, fixtures: dict[str, Any]) -> Any:
        return {"products": fixtures.get("products", []), "cart": [], "orders": []}

    def routes(self) -> list[Route]:
        return [
            ("GET", "", self.index),
            ("POST", "/cart/add", self.add),
            ("GET", "/cart", self.cart),
            ("POST", "/cart/remove", self.remove),
            ("GET", "/checkout", self.checkout_form),
            ("POST", "/checkout", self.checkout),
        ]

    def nav(self) -> str:
        n = sum(i["qty"] for i in self.state["cart"])
        return f"<a id='nav-shop' href='/shop'>Products</a><a id='nav-cart' href='/shop/cart'>Cart ({n})</a>"

    def index(self, req: Request) -> Page:
        q = req.get("q")
        items = [
            p
            for p in self.state["products"]
            if q.lower() in (p["name"] + " " + p.get("category", "")).lower()
        ]
        rows = "".join(
            f"<tr><td>{esc(p['name'])}</td><td>{esc(p.get('category', ''))}</td><td>${p['price']:.2f}</td>"
            "<td><form method='post' action='/shop/cart/add'>"
            f"<input type='hidden' name='id' value='{esc(p['id'])}'>"
            f"<button id='add-{esc(p['id'])}'>Add to cart</button></form></td></tr>"
            for p in items
        )
        search = (
            f"<form method='get' action='/shop'><input type='text' id='q' name='q' value='{esc(q)}' "
            "placeholder='Search products'><button id='search'>Search</button></form>"
        )
        found = f"<p class='note'>{len(items)} products</p>"
        return page("Shop", f"{search}{found}<table>{rows}</table>", self.nav())

    def _product(self, pid: str) -> dict[str, Any] | None:
        return next((p for p in self.state["products"] if p["id"] == pid), None)

    def add(self, req: Request) -> Page:
        p = self._product(req.get("id"))
        if p is not None:
            line = next((i for i in self.state["cart"] if i["id"] == p["id"]), None)
            if line is None:
                self.state["cart"].append({"id": p["id"], "name": p["name"], "qty": 1})
            else:
                line["qty"] += 1
        return redirect("/shop/cart")

    def remove(self, req: Request) -> Page:
        self.state["cart"] = [i for i in self.state["cart"] if i["id"] != req.get("id")]
        return redirect("/shop/cart")

    def _total(self) -> float:
        prices = {p["id"]: p["price"] for p in self.state["products"]}
        return round(float(sum(prices[i["id"]] * i["qty"] for i in self.state["cart"])), 2)

    def cart(self, req: Request) -> Page:
        rows = "".join(
            f"<tr><td>{esc(i['name'])}</td><td>x {i['qty']}</td>"
            "<td><form method='post' action='/shop/cart/remove'>"
            f"<input type='hidden' name='id' value='{esc(i['id'])}'><button id='remove-{esc(i['id'])}'>Remove"
            "</button></form></td></tr>"
            for i in self.state["cart"]
        )
        body = f"<h1>Your cart</h1><table>{rows}</table><p>Total: ${self._total():.2f}</p>"
        if self.state["cart"]:
            body += "<a id='checkout' href='/shop/checkout'><button>Checkout</button></a>"
        return page("Shop", body + " <a id='continue' href='/shop'>Continue shopping</a>", self.nav())

    def checkout_form(self, req: Request) -> Page:
        body = (
            "<h1>Checkout</h1><form method='post' action='/shop/checkout'>"
            "<div class='row'><label>Full name</label><input type='text' id='name' name='name'></div>"
            "<div class='row'><label>Address</label><input type='text' id='address' name='address'></div>"
            "<div class='row'><label>Shipping</label><select id='shipping' name='shipping'>"
            "<option value='standard'>Standard</option>"
            "<option value='express'>Express</option></select></div>"
            "<button id='place-order'>Place order</button></form>"
        )
        return page("Shop", body, self.nav())

    def checkout(self, req: Request) -> Page:
        if not self.state["cart"] or not req.get("name") or not req.get("address"):
            return page(
                "Shop",
                "<h1>Checkout failed</h1><p>Cart, name and address are required.</p>"
                "<a href='/shop/checkout'>Back</a>",
                self.nav(),
            )
        order = {
            "id": f"o{len(self.state['orders']) + 1}",
            "items": sorted(i["name"] for i in self.state["cart"] for _ in range(i["qty"])),
            "name": req.get("name"),
            "address": req.get("address"),
            "shipping": req.get("shipping", "standard"),
            "total": self._total(),
        }
        self.state["orders"].append(order)
        self.state["cart"] = []
        return page("Shop", f"<h1 id='done'>Order {order['id']} placed</h1><p>Thank you!</p>", self.nav())
