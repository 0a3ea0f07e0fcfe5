"""``manage.py`` commands of the engine (Django's layout): the package ``commands``."""
